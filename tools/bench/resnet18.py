"""A ResNet-18 (torchvision's layout: 7x7/2 stem, 3x3/2 max-pool, four stages of two basic blocks,
BatchNorm, global pooling, 1000 classes; random weights and BatchNorm statistics) exported by
torch.onnx.export at opset 13 with a dynamic batch, and 256 random 224 x 224 RGB uint8 images:
the large-image model tools/bench/onnx_speed.sh times with `resnet18`.
    /usr/bin/python3 tools/bench/resnet18.py OUT.onnx OUT.h5
"""
import sys

import h5py
import numpy as np
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else None)

    def forward(self, x):
        y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for cout, stride in [(64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)]:
            blocks.append(Block(cin, cout, stride))
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, 1000)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))


def main(onnx_path, h5_path):
    torch.manual_seed(0)
    model = ResNet18().eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    torch.onnx.export(model, torch.randn(1, 3, 224, 224), onnx_path, opset_version=13, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    images = np.random.default_rng(0).integers(0, 256, (256, 224, 224, 3), dtype=np.uint8)
    with h5py.File(h5_path, "w") as f:
        f["images"] = images
        f["labels"] = np.zeros(256, np.int64)


if __name__ == "__main__":
    main(*sys.argv[1:3])
