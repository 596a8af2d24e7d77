"""The run ledger: one atomic record per notebook, damaged records set aside, a lock per notebook."""
import json
import multiprocessing
import os

import pytest

from shared.ledger import Ledger, write_json_atomic

RECORD = {"status": "ok", "fingerprint": "abc", "parameters": {"profile": "smoke"}}


def test_records_round_trip_and_the_manifest_is_rebuilt_from_them(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.write("ciln/01_a.ipynb", RECORD)
    ledger.write("plench/02_b.ipynb", {**RECORD, "status": "failed"})
    assert ledger.read("ciln/01_a.ipynb") == {**RECORD, "key": "ciln/01_a.ipynb"}
    assert ledger.keys() == ["ciln/01_a.ipynb", "plench/02_b.ipynb"]
    (tmp_path / "manifest.json").write_text("[]")
    summary = json.loads(ledger.write_manifest().read_text())["notebooks"]
    assert {k: r["status"] for k, r in summary.items()} == {"ciln/01_a.ipynb": "ok", "plench/02_b.ipynb": "failed"}
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_failed_write_leaves_the_old_record_whole(tmp_path):
    path = tmp_path / "r.json"
    write_json_atomic(path, {"a": 1})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1} and [p.name for p in tmp_path.iterdir()] == ["r.json"]


@pytest.mark.parametrize("content, reason", [
    (b'{"key": "ciln/01_a.ipynb", "sta', "not a JSON record"), (b"[]", "holds a JSON list"),
    (b"null", "holds a JSON NoneType"), (b"\xff\xfe", "not a JSON record"),
    (b'{"key": "ciln/01_a.ipynb"}', "lacks status, fingerprint, parameters"),
    (json.dumps({**RECORD, "key": "ciln/09_z.ipynb"}).encode(), "is the record of 'ciln/09_z.ipynb'"),
])
def test_a_damaged_record_is_reported_and_set_aside(tmp_path, capsys, content, reason):
    ledger = Ledger(tmp_path)
    ledger.write("ciln/02_b.ipynb", RECORD)
    path = ledger.record_path("ciln/01_a.ipynb")
    path.write_bytes(content)
    assert list(ledger.records()) == ["ciln/02_b.ipynb"]
    err = capsys.readouterr().err
    assert str(path) in err and reason in err
    assert path.with_name("01_a.json.damaged").read_bytes() == content and not path.exists()


def _hold(root, key, ready, release):
    with Ledger(root).lock(key):
        ready.set()
        release.wait(30)


def test_the_lock_is_exclusive_across_processes_and_names_its_holder(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(tmp_path), "ciln/01_a.ipynb", ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        ledger = Ledger(tmp_path)
        with ledger.lock("ciln/01_a.ipynb", wait=False) as free:
            assert free is False
        assert f"pid {holder.pid}" in ledger.holder("ciln/01_a.ipynb")
        with ledger.lock("ciln/02_b.ipynb", wait=False) as free:  # other notebooks are not blocked
            assert free is True
    finally:
        release.set()
        holder.join(30)
    with Ledger(tmp_path).lock("ciln/01_a.ipynb", wait=False) as free:
        assert free is True and f"pid {os.getpid()}" in Ledger(tmp_path).holder("ciln/01_a.ipynb")


def test_a_killed_holder_releases_the_lock(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(tmp_path), "ciln/01_a.ipynb", ready, release))
    holder.start()
    assert ready.wait(30)
    holder.kill()
    holder.join(30)
    with Ledger(tmp_path).lock("ciln/01_a.ipynb", wait=False) as free:
        assert free is True
