"""Dumps written by hand, the way bug reports attach them (h5py or torch.save, no run
attributes): the scan infers the fully-masked-row convention and the softmax scale from the
recorded o where the dump is silent, judges the case under them and says so (`replay.inferred`,
a recorded_convention finding); a real fault behind the convention (dk 2000x too large on the
real keys) is still the finding; a stored scale the recording contradicts is named, never
replaced; a recording no convention explains keeps its recorded_mismatch."""
import os
import tempfile
import unittest

import h5py
import numpy as np
import torch
import torch.nn.functional as F

from attnscope_test_util import cli_json

B, H, S, D, VALID = 2, 4, 16, 32, 11


def bf16_bits(t):
    return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def write_case(path, o_scale=None, scale_attr=None, dk_factor=1.0, fill=None, random_o=False,
               pt=False):
    """Batch 1 pads its last S - VALID tokens: their query rows see no key. The recorded o /
    gradients come from torch's SDPA (O = 0 on those rows) at softmax scale `o_scale`, or, with
    `fill`, from softmax(s.masked_fill(~mask, fill)) (rows uniform over the masked keys).
    pt: a torch.save dict of the tensors instead of HDF5, as bug reports attach them."""
    g = torch.Generator().manual_seed(0)
    q, k, v, do = (torch.randn(B, H, S, D, generator=g).bfloat16() for _ in range(4))
    valid = torch.ones(B, S, dtype=torch.bool)
    valid[1, VALID:] = False
    mask = valid[:, None, :, None] & valid[:, None, None, :]
    qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
    if fill is None:
        o = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask, scale=o_scale)
    else:
        s = (qq @ kk.transpose(-2, -1)).float() * D ** -0.5
        o = (torch.softmax(s.masked_fill(~mask, fill), -1).bfloat16() @ vv)
    o.backward(do)
    dk = kk.grad.clone()
    dk[:, :, :VALID] *= dk_factor
    recorded = dict(q=q, k=k, v=v, do=do, o=o.detach(), dq=qq.grad, dk=dk, dv=vv.grad)
    if random_o:
        recorded["o"] = torch.randn(B, H, S, D, generator=g).bfloat16()
    if pt:
        torch.save({**{n: t.detach() for n, t in recorded.items()}, "mask": mask}, path)
        return
    with h5py.File(path, "w") as f:
        case = f.create_group("case")
        for name, t in recorded.items():
            case.create_dataset(name, data=bf16_bits(t)).attrs["dtype"] = "bfloat16"
        case.create_dataset("mask", data=mask.numpy())
        case.attrs["dtype"] = "bfloat16"
        if scale_attr is not None:
            case.attrs["scale"] = scale_attr


class InferredRunTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "report.h5")

    def tearDown(self):
        self.dir.cleanup()

    def scan(self, *options):
        case = cli_json("scan", self.path, *options)["cases"][0]
        findings = [(f["severity"], f["kind"], f["tensor"]) for f in case["findings"]]
        return case, findings

    def test_zero_rows_are_inferred_as_safe_softmax_and_judged_clean(self):
        write_case(self.path)
        case, findings = self.scan()
        self.assertEqual(case["replay"]["inferred"], {"mask_fill": "safe", "scale": None})
        self.assertEqual([f for f in findings if f[0] == "error"], [])
        self.assertIn(("info", "recorded_convention", "o"), findings)
        self.assertIn("fully masked rows give O = 0 (inferred)", case["replay"]["text"])
        self.assertIn("inferred", case["config"]["judged_under"])

    def test_a_real_fault_behind_the_convention_is_the_finding(self):
        write_case(self.path, dk_factor=2000.0)
        case, findings = self.scan()
        self.assertEqual(case["replay"]["inferred"]["mask_fill"], "safe")
        errors = [f for f in case["findings"] if f["severity"] == "error"]
        self.assertEqual([(f["kind"], f["tensor"]) for f in errors], [("recorded_mismatch", "dk")])
        self.assertEqual(errors[0]["rows"], [0, VALID - 1])  # the real keys only
        self.assertRegex(errors[0]["message"], r"norm ratio (1[5-9]|2[0-4])\d\d\b")

    def test_a_torch_save_report_is_inferred_alike(self):
        self.path = os.path.join(self.dir.name, "report.pt")
        write_case(self.path, dk_factor=2000.0, pt=True)
        case, findings = self.scan()
        self.assertEqual(case["replay"]["inferred"]["mask_fill"], "safe")
        self.assertEqual([f for f in findings if f[0] == "error"],
                         [("error", "recorded_mismatch", "dk")])

    def test_uniform_rows_are_inferred_as_a_finite_fill(self):
        write_case(self.path, fill=torch.finfo(torch.float32).min)
        case, findings = self.scan()
        self.assertEqual(case["replay"]["inferred"]["mask_fill"], "finfo_min")
        self.assertNotIn(("error", "recorded_mismatch", "o"), findings)

    def test_an_absent_scale_is_inferred(self):
        write_case(self.path, o_scale=1.0)
        case, findings = self.scan()
        self.assertEqual(case["replay"]["inferred"], {"mask_fill": "safe", "scale": 1.0})
        self.assertEqual(case["config"]["run_scale"], 1.0)
        self.assertEqual([f for f in findings if f[0] == "error"], [])

    def test_a_stored_scale_the_recording_contradicts_is_named_not_replaced(self):
        write_case(self.path, o_scale=1.0, scale_attr=D ** -0.5)
        case, findings = self.scan()
        self.assertEqual(case["replay"]["inferred"]["scale"], None)
        self.assertAlmostEqual(case["config"]["run_scale"], D ** -0.5)
        self.assertIn(("error", "recorded_mismatch", "o"), findings)
        hint = [f for f in case["findings"] if f["kind"] == "recorded_convention"
                and f["severity"] == "warning"]
        self.assertEqual(len(hint), 1)
        self.assertIn("matches the fp64 replay at softmax scale 1, not at the recorded scale",
                      hint[0]["message"])
        case, _ = self.scan("--scale", "1")  # the hypothesis test agrees
        self.assertIn("o", case["config"]["what_if_explains"])

    def test_a_recording_no_convention_explains_keeps_its_mismatch(self):
        write_case(self.path, random_o=True)
        case, findings = self.scan()
        self.assertEqual(case["replay"]["inferred"], {"mask_fill": None, "scale": None})
        self.assertIn(("error", "recorded_mismatch", "o"), findings)
        self.assertNotIn("recorded_convention", [f[1] for f in findings])


if __name__ == "__main__":
    unittest.main()
