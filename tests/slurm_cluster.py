"""A throw-away single-node Slurm cluster with accounting, started from the Debian packages in a folder.

The daemons run in the foreground as this process's children, each with its own files under ``root``: MariaDB
(``mariadb-install-db`` datadir, a socket and a free TCP port), munged (its own key and socket), slurmdbd,
slurmctld and slurmd, all configured by a generated ``slurm.conf``. Clients find the cluster through
``SLURM_CONF``, so tests and the processes they start use ``cluster.env``. Accounting is there because
submitit reads job states with ``sacct``: without it a cancelled job never looks finished.

    cluster = start_cluster(tmp_path)          # raises ClusterUnavailable(reason, with the daemons' log tails)
    subprocess.run(["sinfo"], env=cluster.env)
    cluster.stop()                             # every daemon by its PID

Settings that keep it fast (measured on a 2-core machine: up in 2-5 s; a 4-task submitit array of trivial calls
back in about 4 s):
``ProctrackType=proctrack/linuxproc`` and ``TaskPlugin=task/none`` (no cgroups), ``KillWait=2`` (submitit jobs
ignore SIGTERM, so the default 30 s stalls every cancel) and ``SchedulerParameters=batch_sched_delay=0``.
Job ids restart at 1 on a fresh cluster, so give every test its own submitit folder.
"""
from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

DAEMONS = ("mariadbd", "mariadb-install-db", "munged", "slurmdbd", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "sacct", "scancel", "sinfo", "squeue", "sacctmgr")
START_TIMEOUT_S = 30


class ClusterUnavailable(RuntimeError):
    """The cluster could not start here; the message says why (missing binaries, or the daemons' logs)."""


@dataclass
class SlurmCluster:
    root: Path
    conf_path: Path
    env: dict[str, str]  # os.environ plus SLURM_CONF: pass to subprocess.run / Popen
    name: str
    startup_s: float = 0.0
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def logs(self, lines: int = 15) -> str:
        """The last ``lines`` lines of every daemon's log."""
        parts = []
        for log in sorted((self.root / "log").glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(parts)

    def stop(self) -> None:
        """Cancel the jobs left (up to 10 s for them to end), SIGTERM to every daemon (the Slurm daemons first),
        SIGKILL after 5 s to any still running, then end the job step daemons (slurmstepd) this cluster left."""
        if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            self._cancel_jobs()
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()
        end = time.monotonic() + 5
        while (steps := self._job_steps()) and time.monotonic() < end:  # a step may be forking its task
            for proc in [p for step in steps for p in (*step.children(recursive=True), step)]:
                try:
                    proc.kill()  # slurmstepd ignores SIGTERM
                except psutil.NoSuchProcess:
                    pass
            psutil.wait_procs(steps, timeout=1)

    def _cancel_jobs(self, wait_s: float = 10) -> None:
        def run(*command) -> str:
            return subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=wait_s).stdout

        end = time.monotonic() + wait_s
        try:
            run("scancel", "--user", getpass.getuser())
            while run("squeue", "-h").strip() and time.monotonic() < end:
                time.sleep(0.2)
        except subprocess.TimeoutExpired:  # the controller does not answer: the daemons are stopped anyway
            pass

    def _job_steps(self) -> list[psutil.Process]:
        """The slurmstepd processes of this cluster (started in its folder, like slurmd), which outlive slurmd."""
        steps = []
        for proc in psutil.process_iter(["name"]):
            try:
                if proc.info["name"] == "slurmstepd" and Path(proc.cwd()) == self.root:
                    steps.append(proc)
            except psutil.Error:
                continue
        return steps


def _which(name: str) -> str | None:
    """The program's path, looking in /usr/sbin and /sbin too (daemons live there; a user's PATH may lack them)."""
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))


def missing_binaries() -> list[str]:
    return [name for name in DAEMONS + CLIENTS if _which(name) is None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, ready, cluster: SlurmCluster, deadline: float) -> None:
    while not ready():
        dead = [name for name, proc in cluster.procs.items() if proc.poll() is not None]
        if dead or time.monotonic() > deadline:
            why = f"{', '.join(dead)} exited" if dead else f"timed out after {START_TIMEOUT_S} s"
            raise ClusterUnavailable(f"waiting for {what}: {why}\n{cluster.logs()}")
        time.sleep(0.1)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _write(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def _configs(root: Path, name: str, ports: dict[str, int]) -> Path:
    user, host = getpass.getuser(), socket.gethostname().split(".")[0]
    auth = f"AuthType=auth/munge\nAuthInfo=socket={root / 'munge' / 'munge.socket'}\n"
    _write(root / "etc" / "slurmdbd.conf", f"""{auth}DbdHost={host}
DbdAddr=127.0.0.1
DbdPort={ports['slurmdbd']}
SlurmUser={user}
PidFile={root / 'run' / 'slurmdbd.pid'}
LogFile={root / 'log' / 'slurmdbd.log'}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={ports['mariadb']}
StorageUser=root
StorageLoc=slurm_acct_db
""")
    _write(root / "etc" / "plugstack.conf", "")
    return _write(root / "etc" / "slurm.conf", f"""ClusterName={name}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ports['slurmctld']}
SlurmdPort={ports['slurmd']}
SlurmUser={user}
SlurmdUser={user}
{auth}CredType=cred/munge
StateSaveLocation={root / 'state'}
SlurmdSpoolDir={root / 'spool'}
SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}
SlurmdPidFile={root / 'run' / 'slurmd.pid'}
SlurmctldLogFile={root / 'log' / 'slurmctld.log'}
SlurmdLogFile={root / 'log' / 'slurmd.log'}
PlugStackConfig={root / 'etc' / 'plugstack.conf'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={ports['slurmdbd']}
AccountingStoragePass={root / 'munge' / 'munge.socket'}
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SlurmdParameters=config_overrides
KillWait=2
InactiveLimit=0
ReturnToService=2
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} RealMemory=1024 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""", 0o644)


def start_cluster(root: str | os.PathLike, *, name: str = "testcluster") -> SlurmCluster:
    """Start MariaDB, munged, slurmdbd, slurmctld and slurmd under ``root`` and wait until the node is idle.

    Raises ClusterUnavailable (binaries missing, a daemon exited, or not ready within 30 s, with the logs)."""
    missing = missing_binaries()
    if missing:
        raise ClusterUnavailable(f"not on PATH: {', '.join(missing)} (apt-get install slurm-wlm munge slurmdbd "
                                 "mariadb-server)")
    start = time.monotonic()
    root = Path(root).absolute()
    if len(str(root / "munge" / "munge.socket")) > 100:
        raise ClusterUnavailable(f"{root} is too long a path for the daemons' Unix sockets (at most ~100 characters)")
    for sub in ("etc", "log", "run", "state", "spool", "munge", "db"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    ports = {daemon: _free_port() for daemon in ("mariadb", "slurmdbd", "slurmctld", "slurmd")}
    conf = _configs(root, name, ports)
    cluster = SlurmCluster(root, conf, {**os.environ, "SLURM_CONF": str(conf)}, name)
    try:
        _start_daemons(cluster, ports, start + START_TIMEOUT_S)
    except BaseException:
        cluster.stop()
        raise
    cluster.startup_s = time.monotonic() - start
    return cluster


def _start_daemons(cluster: SlurmCluster, ports: dict[str, int], deadline: float) -> None:
    root, log, munge, user = cluster.root, cluster.root / "log", cluster.root / "munge", getpass.getuser()

    def daemon(key: str, *command) -> None:
        with open(log / f"{key}.out.log", "ab") as out:
            cluster.procs[key] = subprocess.Popen([_which(command[0]), *command[1:]], stdout=out,
                                                  stderr=subprocess.STDOUT, env=cluster.env, stdin=subprocess.DEVNULL,
                                                  cwd=root)

    def run(*command) -> subprocess.CompletedProcess:
        return subprocess.run([_which(command[0]), *command[1:]], env=cluster.env, capture_output=True, text=True)

    installed = run("mariadb-install-db", "--no-defaults", f"--datadir={root / 'db'}", f"--user={user}",
                    "--auth-root-authentication-method=normal", "--skip-test-db")
    if installed.returncode:
        raise ClusterUnavailable(f"mariadb-install-db failed:\n{installed.stdout[-2000:]}{installed.stderr[-2000:]}")
    daemon("mariadb", "mariadbd", "--no-defaults", f"--datadir={root / 'db'}",
           f"--socket={root / 'run' / 'mysql.sock'}", f"--port={ports['mariadb']}", "--bind-address=127.0.0.1", f"--user={user}",
           f"--pid-file={root / 'run' / 'mariadb.pid'}", f"--log-error={log / 'mariadb.log'}",
           "--innodb-buffer-pool-size=32M", "--skip-log-bin", "--innodb-flush-log-at-trx-commit=0")
    key = munge / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    daemon("munged", "munged", "--foreground", "--force", f"--key-file={key}", f"--socket={munge / 'munge.socket'}",
           f"--pid-file={munge / 'munged.pid'}", f"--log-file={log / 'munged.log'}", f"--seed-file={munge / 'seed'}")
    _wait("MariaDB", lambda: _port_open(ports["mariadb"]), cluster, deadline)
    _wait("munged", lambda: (munge / "munge.socket").exists(), cluster, deadline)
    daemon("slurmdbd", "slurmdbd", "-D")
    _wait("slurmdbd", lambda: _port_open(ports["slurmdbd"]), cluster, deadline)
    added = run("sacctmgr", "-i", "add", "cluster", cluster.name)
    if added.returncode and "already exists" not in added.stdout + added.stderr:
        raise ClusterUnavailable(f"sacctmgr add cluster failed: {added.stdout}{added.stderr}\n{cluster.logs()}")
    daemon("slurmctld", "slurmctld", "-D", "-i")
    daemon("slurmd", "slurmd", "-D")
    _wait("an idle node", lambda: run("sinfo", "-h", "-o", "%T").stdout.strip() == "idle", cluster, deadline)
