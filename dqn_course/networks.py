"""The Nature DQN network (Mnih et al., 2015), taking uint8 frames.

Frames cross to the device as uint8 (1 byte per pixel) and become floats in [0, 1] there, inside
``forward``: a float32 batch on the host would be 4x the bytes to store and to copy.
"""
from __future__ import annotations

import torch
from torch import nn

from dqn_course.contracts import Count, check_module


class NatureCNN(nn.Module):
    """3 conv layers + 512-unit hidden layer; input (B, stack, 84, 84) uint8, output (B, n_actions)."""

    def __init__(self, n_actions: Count, in_channels: Count = 4):
        super().__init__()
        self.n_actions = n_actions
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, 32, kernel_size=8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, kernel_size=3, stride=1), nn.ReLU(),
            nn.Flatten(),
            nn.Linear(64 * 7 * 7, 512), nn.ReLU(),
            nn.Linear(512, n_actions),
        )

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        if frames.dtype != torch.uint8:
            raise TypeError(f"NatureCNN takes uint8 frames (it scales them itself), got {frames.dtype}")
        return self.net(frames.to(self.net[0].weight.dtype) / 255.0)  # float32, or float64 (DQNAgent's float64)


check_module(globals())
