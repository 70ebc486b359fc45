"""Plugins that move the process measuring them, as a hostile user's would (written into a
test's folder as the module ``hostile``): each misbehaves only in the command it targets, so
that its validation passes and its measure job is where it strikes."""

from pathlib import Path

SOURCE = '''
import os
import signal
import sys
import threading
import time

import torch

from kernels.catalog import implementation


def attention(q, k, v, causal):
    s = (q.float() @ k.float().transpose(-1, -2)) / q.shape[-1] ** 0.5
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return (s.softmax(-1) @ v.float()).to(q.dtype)


def measuring():
    return "measure" in sys.argv


@implementation("h_chdir", stores="none")
def h_chdir(q, k, v, *, causal):
    if measuring():
        os.chdir("/")
    return attention(q, k, v, causal)


@implementation("h_exit", stores="none")
def h_exit(q, k, v, *, causal):
    if measuring():
        os._exit(0)
    return attention(q, k, v, causal)


@implementation("h_sysexit", stores="none")
def h_sysexit(q, k, v, *, causal):
    if measuring():
        sys.exit(3)
    return attention(q, k, v, causal)


@implementation("h_threads", stores="none")
def h_threads(q, k, v, *, causal):
    if measuring() and threading.active_count() < 40:
        for _ in range(50):
            threading.Thread(target=time.sleep, args=(95,)).start()
    return attention(q, k, v, causal)


@implementation("h_killbw", stores="none")
def h_killbw(q, k, v, *, causal):
    """Killed (as by the out-of-memory killer) in its validation's first backward case."""
    if "validate" in sys.argv and q.requires_grad:
        os.kill(os.getpid(), signal.SIGKILL)
    s = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return s.softmax(-1) @ v


@implementation("h_masked_fill", stores="none")
def h_masked_fill(q, k, v, *, causal):
    """In its measure job, replaces a method torch.Tensor inherits from torch._C.TensorBase (so
    not in vars(torch.Tensor)) by one that ignores its mask: every causal float64 reference
    computed after it in the same process is unmasked."""
    if measuring():
        torch.Tensor.masked_fill = lambda self, mask, value: self.clone()
    return attention(q, k, v, causal)


@implementation("h_hang", stores="none")
def h_hang(q, k, v, *, causal):
    while measuring():
        sum(range(1000))
    return attention(q, k, v, causal)
'''


def write_hostile(folder: Path) -> Path:
    """The module ``hostile`` in ``folder`` (put folder on PYTHONPATH)."""
    (folder / "hostile.py").write_text(SOURCE)
    return folder
