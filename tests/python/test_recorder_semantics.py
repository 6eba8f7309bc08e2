"""Run semantics written per case (schema 1.1): torch_version, backend (the SDPA kernel the
dispatcher chose, sdpa_kernel contexts respected; "custom" for @attention functions), dtype as
the kernel ran it (autocast included), autocast_dtype, mask_convention, call_index; the file
root's attnscope_schema(_minor) and writer; and the warning for a step without any attention call."""
import os
import tempfile
import tomllib
import unittest
import warnings

import h5py
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import attnscope_record
from attnscope_record import Recorder, attention
from attnscope_test_util import read_case

PYPROJECT = os.path.join(os.path.dirname(attnscope_record.__file__), "..", "pyproject.toml")
CASE = "/step_000000/layer_00"


def qkv(dtype=torch.float32, hk=4):
    """q [2, 4, 6, 16], k/v [2, hk, 6, 16] requiring grad."""
    torch.manual_seed(5)
    shapes = ((2, 4, 6, 16), (2, hk, 6, 16), (2, hk, 6, 16))
    return [torch.randn(*s).to(dtype).requires_grad_(True) for s in shapes]


class SemanticsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "dump.h5")

    def tearDown(self):
        self.dir.cleanup()

    def record(self, dtype=torch.float32, autocast=None, backend=None, **sdpa_kwargs):
        """Attributes of one recorded SDPA call (forward + backward), optionally under a CPU
        autocast of `autocast` and inside sdpa_kernel(backend)."""
        q, k, v = qkv(dtype, 2 if sdpa_kwargs.get("enable_gqa") else 4)
        rec = Recorder(self.path)
        with rec.step(0), torch.autocast("cpu", dtype=autocast or torch.bfloat16,
                                         enabled=autocast is not None):
            if backend is None:
                o = F.scaled_dot_product_attention(q, k, v, **sdpa_kwargs)
            else:
                with sdpa_kernel(backend):
                    o = F.scaled_dot_product_attention(q, k, v, **sdpa_kwargs)
            o.float().sum().backward()
        self.assertEqual(rec.written, [CASE])
        return read_case(self.path, CASE)

    def test_file_root_names_schema_and_writer(self):
        self.record()
        with open(PYPROJECT, "rb") as f:
            version = tomllib.load(f)["project"]["version"]
        self.assertEqual(version, "0.2.0")
        with h5py.File(self.path, "r") as f:
            self.assertEqual(dict(f.attrs), {"attnscope_schema": 1, "attnscope_schema_minor": 2,
                                             "writer": f"attnscope_record {version}"})

    def test_plain_precisions_record_their_dtype_and_cpu_flash(self):
        for dtype, name in ((torch.float32, "float32"), (torch.float16, "float16"),
                            (torch.bfloat16, "bfloat16")):
            t, attrs = self.record(dtype)
            self.assertEqual((attrs["dtype"], attrs["backend"]), (name, "sdpa_flash"), name)
            self.assertEqual(attrs["torch_version"], torch.__version__)
            self.assertEqual((attrs["call_index"], attrs["micro_batch"], attrs["layer"]),
                             (0, 0, 0))
            for key in ("autocast_dtype", "mask_convention", "dropout_p", "dropout_replay"):
                self.assertNotIn(key, attrs, name)
            self.assertEqual(t["q"].dtype, dtype)

    def test_autocast_records_the_precision_the_kernel_ran_in(self):
        t, attrs = self.record(torch.float32, autocast=torch.bfloat16)
        self.assertEqual((attrs["dtype"], attrs["autocast_dtype"], attrs["backend"]),
                         ("bfloat16", "bfloat16", "sdpa_flash"))
        # Tensors are written as passed (q fp32); the output is what the bf16 kernel stored.
        self.assertEqual((t["q"].dtype, t["o"].dtype), (torch.float32, torch.bfloat16))
        # Autocast casts fp16 inputs to its bf16 as well (every floating type but float64).
        t, attrs = self.record(torch.float16, autocast=torch.bfloat16)
        self.assertEqual((attrs["dtype"], attrs["autocast_dtype"]), ("bfloat16", "bfloat16"))
        self.assertEqual(t["o"].dtype, torch.bfloat16)
        _, attrs = self.record(torch.float64, autocast=torch.bfloat16)
        self.assertEqual(attrs["dtype"], "float64")
        self.assertNotIn("autocast_dtype", attrs)

    def test_backend_follows_sdpa_kernel_and_dropout(self):
        self.assertEqual(self.record(backend=SDPBackend.MATH)[1]["backend"], "sdpa_math")
        self.assertEqual(self.record(backend=[SDPBackend.FLASH_ATTENTION, SDPBackend.MATH])[1]
                         ["backend"], "sdpa_flash")
        # CPU flash refuses dropout: the dispatcher falls back to the math kernel.
        self.assertEqual(self.record(dropout_p=0.25)[1]["backend"], "sdpa_math")
        self.assertEqual(self.record(enable_gqa=True)[1]["backend"], "sdpa_flash")

    def test_mask_convention(self):
        keep = torch.ones(6, 6, dtype=torch.bool).tril()
        t, attrs = self.record(attn_mask=keep)
        self.assertEqual(attrs["mask_convention"], "attend")
        self.assertIn("mask", t)
        t, attrs = self.record(attn_mask=torch.zeros(6, 6).masked_fill(~keep, -1e4))
        self.assertEqual(attrs["mask_convention"], "additive")
        self.assertIn("bias", t)

    def test_registered_function_is_custom(self):
        @attention
        def my_attention(q, k, v, scale=None):
            return torch.softmax(q @ k.transpose(-2, -1) * scale, -1) @ v

        q, k, v = qkv(torch.float16)
        rec = Recorder(self.path)
        with rec.step(0):
            my_attention(q, k, v, scale=0.5).float().sum().backward()
        _, attrs = read_case(self.path, CASE)
        self.assertEqual((attrs["backend"], attrs["dtype"], attrs["scale"]),
                         ("custom", "float16", 0.5))

    def test_call_index_counts_calls_of_the_step(self):
        q, k, v = qkv()
        rec = Recorder(self.path, layers=[1, 2])
        with rec.step(4):
            out = sum(F.scaled_dot_product_attention(q * (i + 1), k, v) for i in range(3))
            out.sum().backward()
        self.assertEqual(rec.written, ["/step_000004/layer_01", "/step_000004/layer_02"])
        for i, group in enumerate(rec.written, 1):
            attrs = read_case(self.path, group)[1]
            self.assertEqual((attrs["call_index"], attrs["layer"], attrs["micro_batch"]),
                             (i, i, 0))

    def test_step_without_attention_call_warns_once_with_the_fix(self):
        torch.manual_seed(0)
        w = torch.randn(8, 8, requires_grad=True)
        rec = Recorder(self.path, steps=[0, 1, 3])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for step in range(4):
                with rec.step(step):
                    x = torch.randn(1, 5, 8) @ w
                    if step == 3:
                        x = F.scaled_dot_product_attention(x, x, x)
                    else:  # eager attention: matmul + softmax, invisible to the recorder
                        x = torch.softmax(x @ x.transpose(-2, -1), -1) @ x
                    x.sum().backward()
        messages = [str(c.message) for c in caught]
        self.assertEqual(len(messages), 1, messages)
        self.assertEqual(caught[0].category, RuntimeWarning)
        self.assertRegex(messages[0], r"^attnscope_record: step 0 made no attention call .*"
                         r"its own matmul \+ softmax.*attn_implementation=\"sdpa\".*"
                         r"@attnscope_record\.attention")
        self.assertEqual(rec.written, ["/step_000003/layer_00"])

    def test_unselected_calls_are_still_calls(self):
        q, k, v = qkv()
        rec = Recorder(self.path, layers=[5])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with rec.step(0):
                F.scaled_dot_product_attention(q, k, v).sum().backward()
        self.assertEqual(rec.written, [])


if __name__ == "__main__":
    unittest.main()
