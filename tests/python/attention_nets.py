"""Small attention models the recorder tests share: `Net` runs 3 SDPA blocks, each optionally
under torch.utils.checkpoint (use_reentrant True or False)."""
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class Block(torch.nn.Module):
    """x [B, S, 16] -> x + W_o SDPA(q, k, v), 2 heads of 8 (q, k, v [B, 2, S, 8])."""

    def __init__(self, dropout_p):
        super().__init__()
        self.qkv, self.out = torch.nn.Linear(16, 48), torch.nn.Linear(16, 16)
        self.dropout_p = dropout_p

    def forward(self, x):
        B, S, _ = x.shape
        q, k, v = self.qkv(x).view(B, S, 3, 2, 8).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout_p)
        return x + self.out(o.transpose(1, 2).reshape(B, S, 16))


class Net(torch.nn.Module):
    """Input projection, then 3 blocks, each checkpointed when `reentrant` is a bool. Weights
    are the same for every instance (seeded)."""

    def __init__(self, dropout_p=0.0):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Linear(16, 16)
        self.blocks = torch.nn.ModuleList(Block(dropout_p) for _ in range(3))
        self.reentrant = None

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x) if self.reentrant is None else checkpoint(
                block, x, use_reentrant=self.reentrant)
        return x
