"""Plench's networks as featurizer + linear classifier (the holistic algorithms add heads on the features).

- ``mlp``: ``Linear(d, 500) -> ReLU`` (tabular; "a hidden layer width of 500 equipped with the ReLU").
- ``resnet32``: the CIFAR ResNet-32 the official code calls "ResNet" (64-d features, ~0.46M parameters).
- ``densenet_bc``: DenseNet-BC for Tables 3-4. The official code never builds its ``lib/densenet.py``; its
  defaults (depth 22, growth rate 12, compression 0.5, no dropout) are the only evidence and are used here.
- ``digits_cnn``: the offline image-path network: two 3x3 convolutions (32, 64), global average pooling.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from shared.errors import unknown_choice
from shared.models import CifarResNet


class MLPFeaturizer(nn.Module):
    def __init__(self, in_features: int, width: int = 500):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(in_features, width), nn.ReLU())
        self.n_outputs = width

    def forward(self, x):
        return self.net(x)


class ResNetFeaturizer(nn.Module):
    """CIFAR ResNet-(6n+2) without its final layer: (B, C, 32, 32) -> (B, 64)."""

    def __init__(self, depth: int, in_channels: int):
        super().__init__()
        self.body = CifarResNet(depth, in_channels, num_classes=1)
        self.body.fc = nn.Identity()
        self.n_outputs = 64

    def forward(self, x):
        return self.body(x)


class _Bottleneck(nn.Module):
    def __init__(self, in_planes: int, growth: int):
        super().__init__()
        self.bn1, self.conv1 = nn.BatchNorm2d(in_planes), nn.Conv2d(in_planes, 4 * growth, 1, bias=False)
        self.bn2, self.conv2 = nn.BatchNorm2d(4 * growth), nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, x):
        out = self.conv1(F.relu(self.bn1(x)))
        out = self.conv2(F.relu(self.bn2(out)))
        return torch.cat([x, out], 1)


class DenseNetBCFeaturizer(nn.Module):
    """DenseNet-BC (Huang et al., 2017) for 32x32 inputs: 3 dense blocks of (depth - 4) // 6 bottlenecks."""

    def __init__(self, in_channels: int, depth: int = 22, growth: int = 12, compression: float = 0.5):
        super().__init__()
        n = (depth - 4) // 6
        planes = 2 * growth
        layers: list[nn.Module] = [nn.Conv2d(in_channels, planes, 3, padding=1, bias=False)]
        for block in range(3):
            for _ in range(n):
                layers.append(_Bottleneck(planes, growth))
                planes += growth
            if block < 2:
                out = int(math.floor(planes * compression))
                layers += [nn.BatchNorm2d(planes), nn.ReLU(), nn.Conv2d(planes, out, 1, bias=False), nn.AvgPool2d(2)]
                planes = out
        layers += [nn.BatchNorm2d(planes), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.net = nn.Sequential(*layers)
        self.n_outputs = planes

    def forward(self, x):
        return self.net(x)


class DigitsCNNFeaturizer(nn.Module):
    """Two 3x3 convolutions (32, 64 channels) + global average pooling, for 8x8 digits: (B, 1, 8, 8) -> (B, 64)."""

    def __init__(self, in_channels: int = 1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.n_outputs = 64

    def forward(self, x):
        return self.net(x)


FEATURIZERS = {
    "mlp": lambda shape: MLPFeaturizer(math.prod(shape)),
    "resnet32": lambda shape: ResNetFeaturizer(32, shape[0]),
    "densenet_bc": lambda shape: DenseNetBCFeaturizer(shape[0]),
    "digits_cnn": lambda shape: DigitsCNNFeaturizer(shape[0]),
}


def featurizer(arch: str, input_shape: tuple[int, ...]) -> nn.Module:
    """A featurizer for inputs of shape ``input_shape`` ((d,) or (C, H, W)); ``.n_outputs`` is its width."""
    if arch not in FEATURIZERS:
        raise unknown_choice("network", arch, FEATURIZERS)
    return FEATURIZERS[arch](tuple(input_shape))


def projection_head(n_in: int, feat_dim: int) -> nn.Module:
    """``Linear -> ReLU -> Linear`` to ``feat_dim``; callers L2-normalise its output (PiCO, ABLE, DIRK, ALIM, PiCO+)."""
    return nn.Sequential(nn.Linear(n_in, n_in), nn.ReLU(), nn.Linear(n_in, feat_dim))
