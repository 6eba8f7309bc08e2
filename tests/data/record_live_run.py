#!/usr/bin/env python3
"""One training run recorded with attnscope_record while a test watches its dump:

    record_live_run.py DUMP

writes step 0, prints "step 0 written", waits for a line on stdin, then records steps 1-3
(0.5 s apart; step 2 with a NaN in q) and closes. Each step is one SDPA call, q, k, v
[1, 2, 5, 8]. Needs attnscope_record on PYTHONPATH (python/)."""
import sys
import time

import torch
import torch.nn.functional as F

from attnscope_record import Recorder

rec = Recorder(sys.argv[1])
for n in range(4):
    if n == 1:
        print("step 0 written", flush=True)
        sys.stdin.readline()
    torch.manual_seed(n)
    q, k, v = (torch.randn(1, 2, 5, 8, requires_grad=True) for _ in range(3))
    if n == 2:
        with torch.no_grad():
            q[0, 1, 3, 2] = float("nan")
    with rec.step(n):
        F.scaled_dot_product_attention(q, k, v).sum().backward()
    time.sleep(0.5)
rec.close()
