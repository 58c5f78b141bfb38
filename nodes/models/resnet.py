"""IC: ResNet-18 for CIFAR-10 (3x32x32 inputs, 10 classes), as in Gavel's image-classification job.

The CIFAR variant: a 3x3 stem without max-pooling, four stages of two BasicBlocks with strides
1, 2, 2, 2, global average pooling and a linear classifier. ``width`` is the first stage's
channel count (64 in the paper model); smaller sizes keep the block structure and narrow it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F


@dataclass(frozen=True)
class ResNetConfig:
    width: int
    blocks: tuple[int, ...] = (2, 2, 2, 2)
    num_classes: int = 10
    image_shape: tuple[int, int, int] = (3, 32, 32)


SIZES = {
    "tiny": ResNetConfig(width=4),
    "small": ResNetConfig(width=8),
    "paper": ResNetConfig(width=64),
}


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, cfg: ResNetConfig) -> None:
        super().__init__()
        w = cfg.width
        self.conv1 = nn.Conv2d(cfg.image_shape[0], w, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        stages, cin = [], w
        for i, n in enumerate(cfg.blocks):
            cout = w * 2**i
            blocks = [
                BasicBlock(cin if j == 0 else cout, cout, (1 if i == 0 else 2) if j == 0 else 1)
                for j in range(n)
            ]
            stages.append(nn.Sequential(*blocks))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.linear = nn.Linear(cin, cfg.num_classes)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        logits: Tensor = self.linear(out)
        return logits


def build(cfg: ResNetConfig) -> nn.Module:
    return ResNet(cfg)


def loss(model: nn.Module, batch: dict[str, Tensor]) -> Tensor:
    return F.cross_entropy(model(batch["image"]), batch["label"])


@torch.no_grad()
def evaluate(model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> float:
    """Top-1 accuracy in [0, 1]."""
    correct = total = 0
    for b in batches:
        correct += int((model(b["image"]).argmax(1) == b["label"]).sum())
        total += int(b["label"].numel())
    return correct / max(total, 1)


def optimizer(params: Iterable[Tensor], lr: float) -> torch.optim.Optimizer:
    """SGD with momentum 0.9 and weight decay 5e-4 (the usual CIFAR ResNet recipe)."""
    return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=5e-4)
