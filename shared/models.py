"""Network architectures used by several papers, behind one registry.

    model = build_model("resnet20", in_channels=3, num_classes=10)

- ``mlp``: fully connected, ReLU (tabular features or flattened images)
- ``tiny_cnn``: two conv layers (~20k parameters), the smoke profile's image model
- ``lenet5``: LeNet-5 with ReLU (6/16 conv, 120/84 fully connected)
- ``resnet20`` / ``resnet32``: CIFAR ResNets of He et al. (2016): 3 stages of 3x3 BasicBlocks, 16/32/64
  channels, option-A (zero-padding) shortcuts, Kaiming init
- ``wrn28_10``: Wide ResNet-28-10 (Zagoruyko and Komodakis, 2016): pre-activation wide blocks, widths
  160/320/640, dropout between the convolutions (0.3 by default), 36.5M parameters
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from shared.errors import unknown_choice


class MLP(nn.Module):
    def __init__(self, in_features: int, num_classes: int, hidden: tuple[int, ...] = (256,), dropout: float = 0.0):
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = in_features
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(dropout)]
            width = h
        layers.append(nn.Linear(width, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)

    def features(self, x):
        """Penultimate activations (n, hidden[-1]): every layer but the last Linear (the flattened input without
        hidden layers), so that ``classifier(features(x)) == forward(x)``."""
        return self.net[:-1](x)

    @property
    def classifier(self) -> nn.Linear:
        """The last Linear layer, (hidden[-1] -> num_classes)."""
        return self.net[-1]


class TinyCNN(nn.Module):
    def __init__(self, in_channels: int, num_classes: int, width: int = 16):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(2 * width, 4 * width, 3, padding=1), nn.BatchNorm2d(4 * width), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Linear(4 * width, num_classes)

    def forward(self, x):
        return self.head(self.features(x))


class LeNet5(nn.Module):
    def __init__(self, in_channels: int = 1, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        )
        self.classifier = nn.Sequential(nn.LazyLinear(120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, num_classes))

    def forward(self, x):
        return self.classifier(self.features(x))


class _BasicBlock(nn.Module):
    def __init__(self, in_planes: int, planes: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.pad = planes - in_planes if (stride != 1 or in_planes != planes) else 0
        self.stride = stride

    def shortcut(self, x):
        if self.pad == 0 and self.stride == 1:
            return x
        x = x[:, :, :: self.stride, :: self.stride]
        return F.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """ResNet-(6n+2) for 32x32 inputs (He et al., 2016, Section 4.2)."""

    def __init__(self, depth: int, in_channels: int = 3, num_classes: int = 10):
        super().__init__()
        if (depth - 2) % 6:
            raise ValueError(f"CIFAR ResNet depth must be 6n+2 (20, 32, 44, 56), got {depth}")
        n = (depth - 2) // 6
        self.conv = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        blocks, planes = [], 16
        for stage, width in enumerate((16, 32, 64)):
            for i in range(n):
                blocks.append(_BasicBlock(planes, width, 2 if (stage > 0 and i == 0) else 1))
                planes = width
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, num_classes)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight)

    def forward(self, x):
        out = F.relu(self.bn(self.conv(x)))
        out = self.blocks(out)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(out, 1), 1))


class _WideBlock(nn.Module):
    def __init__(self, in_planes: int, planes: int, stride: int, dropout: float):
        super().__init__()
        self.bn1, self.conv1 = nn.BatchNorm2d(in_planes), nn.Conv2d(in_planes, planes, 3, 1, 1, bias=False)
        self.bn2, self.conv2 = nn.BatchNorm2d(planes), nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.shortcut = (nn.Conv2d(in_planes, planes, 1, stride, bias=False)
                         if stride != 1 or in_planes != planes else nn.Identity())

    def forward(self, x):
        out = self.conv1(F.relu(self.bn1(x)))
        out = self.conv2(F.relu(self.bn2(self.dropout(out))))
        return out + self.shortcut(x)


class WideResNet(nn.Module):
    """WRN-depth-k for 32x32 inputs: (depth - 4) / 6 wide blocks per stage."""

    def __init__(self, depth: int = 28, widen: int = 10, in_channels: int = 3, num_classes: int = 10, dropout: float = 0.3):
        super().__init__()
        if (depth - 4) % 6:
            raise ValueError(f"Wide ResNet depth must be 6n+4, got {depth}")
        n, widths = (depth - 4) // 6, [16, 16 * widen, 32 * widen, 64 * widen]
        self.conv = nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False)
        blocks, planes = [], widths[0]
        for stage, width in enumerate(widths[1:]):
            for i in range(n):
                blocks.append(_WideBlock(planes, width, 2 if (stage > 0 and i == 0) else 1, dropout))
                planes = width
        self.blocks = nn.Sequential(*blocks)
        self.bn = nn.BatchNorm2d(planes)
        self.fc = nn.Linear(planes, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        out = F.relu(self.bn(self.blocks(self.conv(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(out, 1), 1))


MODELS = {
    "mlp": lambda in_shape, num_classes, **kw: MLP(_numel(in_shape), num_classes, **kw),
    "tiny_cnn": lambda in_shape, num_classes, **kw: TinyCNN(in_shape[0], num_classes, **kw),
    "lenet5": lambda in_shape, num_classes, **kw: LeNet5(in_shape[0], num_classes),
    "resnet20": lambda in_shape, num_classes, **kw: CifarResNet(20, in_shape[0], num_classes),
    "resnet32": lambda in_shape, num_classes, **kw: CifarResNet(32, in_shape[0], num_classes),
    "wrn28_10": lambda in_shape, num_classes, **kw: WideResNet(28, 10, in_shape[0], num_classes, **kw),
}


def _numel(shape) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


def build_model(name: str, in_shape: tuple[int, ...], num_classes: int, **kwargs) -> nn.Module:
    """A registered model for inputs of shape ``in_shape`` (C, H, W) or (d,) and ``num_classes`` outputs."""
    if name not in MODELS:
        raise unknown_choice("model", name, MODELS)
    model = MODELS[name](tuple(in_shape), num_classes, **kwargs)
    with torch.no_grad():  # materialise lazy layers
        model.eval()(torch.zeros(2, *in_shape))
    return model
