"""The one place the course picks its ``torch.device``."""
from __future__ import annotations

import os

import torch


def pick_device(prefer: str | None = None) -> torch.device:
    """``prefer`` or $DQN_COURSE_DEVICE if set, else CUDA when available, else the CPU."""
    choice = prefer or os.environ.get("DQN_COURSE_DEVICE")
    if choice:
        return torch.device(choice)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
