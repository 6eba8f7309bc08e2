#!/usr/bin/env python3
"""A step with two SDPA calls recorded by attnscope_record, the second one batch-broadcast:

    record_pooling_call.py DUMP [--nan]

layer 0: self-attention, q = k = v [4, 2, 32, 16]; layer 1: a learned-query pooling head, q
[1, 2, 4, 16] against k / v [4, 2, 32, 16] (torch broadcasts q over the batch). --nan: x holds a NaN, so
layer 0 has errors. Needs attnscope_record on PYTHONPATH (python/)."""
import sys

import torch
import torch.nn.functional as F

from attnscope_record import Recorder

torch.manual_seed(0)
x = torch.randn(4, 2, 32, 16)
if "--nan" in sys.argv[2:]:
    x[1, 0, 5, 3] = float("nan")
x.requires_grad_(True)
query = torch.randn(1, 2, 4, 16, requires_grad=True)
rec = Recorder(sys.argv[1])
with rec.step(0):
    h = F.scaled_dot_product_attention(x, x, x)
    pooled = F.scaled_dot_product_attention(query, h, h)
    pooled.sum().backward()
rec.close()
