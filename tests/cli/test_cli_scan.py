"""attnscope-cli scan on the bundled sample: the findings of every case (DESIGN §4 JSON shape, the
exact kinds, precision_loss of the training series), the table, --clip, --precision / --mode /
--mask-fill, --case globs and FILE::CASE, exit codes 0 / 1 / 2, and unreadable data named once
(probe or in-process reader)."""
import os
import subprocess
import sys
import tempfile
import unittest

import h5py

from cli_support import BAD_DATA, REFUSING_PROBE, SAMPLE, CliTestCase, by_path, kinds_of

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_PACKAGE = os.path.normpath(os.path.join(HERE, "..", "..", "python"))
# Two SDPA calls of one step recorded by attnscope_record, the second batch-broadcast.
RECORD_POOLING = os.path.normpath(os.path.join(HERE, "..", "data", "record_pooling_call.py"))

# The kinds reported wherever the outputs and gradients hold NaN.
NAN_KINDS = ["clip_spreads_nan", "nonfinite_gradient", "nonfinite_output"]


def kinds_by_path(doc, selected):
    """{path: kinds_of(case)} of the cases whose path `selected` accepts."""
    return {c["path"]: kinds_of(c) for c in doc["cases"] if selected(c["path"])}


class CliScanTest(CliTestCase):
    def test_cli_scan_sample_json_shape_and_expected_kinds(self):
        doc = self.cli_json("scan", "--json", SAMPLE, exit=1)
        self.assertEqual(len(doc["cases"]), 37)
        self.assertTrue(doc["file"].endswith("seed_cases.h5"), doc["file"])
        case_keys = {"path", "shape", "config", "stats", "findings"}
        self.assertEqual({c.get("path"): sorted(case_keys - set(c)) for c in doc["cases"]
                          if not set(c) >= case_keys}, {}, "keys missing from cases")
        finding_keys = {"kind", "severity", "tensor", "batch", "head", "rows", "cols", "count",
                        "message", "remedy"}
        findings = [(c["path"], f) for c in doc["cases"] for f in c["findings"]]
        self.assertEqual([(path, sorted(finding_keys - set(f))) for path, f in findings
                          if not set(f) >= finding_keys], [], "keys missing from findings")
        self.assertEqual([(path, f) for path, f in findings
                          if not (f["severity"] in ("error", "warning", "info") and f["message"]
                                  and f["remedy"])], [], "bad severity or empty message / remedy")

        cases = by_path(doc)
        overflow = [f for f in cases["/fp16_score_overflow"]["findings"]
                    if f["kind"] == "score_overflow"]
        self.assertEqual([(f["severity"], f["batch"], f["head"], f["rows"], f["modes"])
                          for f in overflow], [("error", 0, 3, [12, 40], ["unfused"])])
        self.assertIn("8.51e5", overflow[0]["message"])

        padding = cases["/padding_mask_fp16"]["findings"]
        self.assertTrue(any(f["kind"] == "mask_fill_overflow" and f["severity"] == "error"
                            and f["tensor"] == "bias" and "-1e9" in f["message"] for f in padding),
                        [f for f in padding if f["kind"] == "mask_fill_overflow"])
        self.assertTrue(any(f["kind"] == "fully_masked_row" and f["severity"] == "error"
                            and f["batch"] == 1 and f["rows"] == [70, 95] for f in padding),
                        [f for f in padding if f["kind"] == "fully_masked_row"])
        self.assertNotIn("score_overflow", kinds_of(cases["/padding_mask_fp16"]))

        self.assertEqual([(f["kind"], f["head"]) for f in cases["/exploding_grad"]["findings"]
                          if f["severity"] != "info"], [("gradient_explosion", 5)])
        healthy = cases["/healthy_b2_h8_s1024"]
        self.assertEqual([f for f in healthy["findings"] if f["severity"] != "info"], [])
        self.assertEqual([(r["tensor"], r["within_rule"]) for r in healthy["stats"]["recorded"]],
                         [("o", True), ("lse", True)])
        mismatch = cases["/recorded_mismatch"]["findings"]
        self.assertEqual(sorted((f["tensor"], f["head"]) for f in mismatch),
                         [("dk", 2), ("dq", 1), ("dv", 3)])
        self.assertEqual([(f["kind"], f["severity"]) for f in mismatch
                          if (f["kind"], f["severity"]) != ("recorded_mismatch", "error")], [])

        late = kinds_by_path(doc, lambda p: p >= "/train/step_005")
        self.assertEqual({p: k for p, k in late.items() if "score_overflow" not in k}, {},
                         "steps 5-7 without score_overflow")
        nonfinite = {"score_overflow", "nonfinite_output", "nonfinite_gradient"}
        early = kinds_by_path(doc, lambda p: "/train/step_00" in p and p < "/train/step_005")
        self.assertEqual({p: sorted(nonfinite & set(k)) for p, k in early.items()
                          if nonfinite & set(k)}, {}, "steps 0-4 with overflow or non-finite")
        first = kinds_by_path(doc, lambda p: p.startswith("/train/") and p < "/train/step_002")
        self.assertEqual(first, dict.fromkeys(first, []), "findings at steps 0-1")

    # The exact set of finding kinds of every sample case (11 of the 13 kinds; masked_nan_leak
    # and silent_zero_row are pinned by crafted cases in tests/analysis).
    def test_cli_scan_sample_kinds_of_every_case(self):
        doc = self.cli_json("scan", "--json", SAMPLE, "--threads", "2", exit=1)
        clean = kinds_by_path(doc, lambda p: "/train/" < p < "/train/step_002/layer_02"
                              or p == "/healthy_b2_h8_s1024")
        self.assertEqual(clean, dict.fromkeys(clean, []))
        lossy = kinds_by_path(doc, lambda p: "/train/step_002/layer_02" <= p < "/train/step_005")
        self.assertEqual(lossy, dict.fromkeys(lossy, ["precision_loss"]))
        late = kinds_by_path(doc, lambda p: p >= "/train/step_005")
        self.assertEqual(late, dict.fromkeys(late, sorted(NAN_KINDS + ["score_overflow"])))
        cases = by_path(doc)
        self.assertEqual(kinds_of(cases["/fp16_score_overflow"]),
                         sorted(NAN_KINDS + ["exp_overflow", "score_overflow"]))
        self.assertEqual(kinds_of(cases["/padding_mask_fp16"]),
                         sorted(NAN_KINDS + ["fully_masked_row", "mask_fill_overflow"]))
        self.assertEqual(kinds_of(cases["/exploding_grad"]), ["gradient_explosion"])
        self.assertEqual(kinds_of(cases["/recorded_mismatch"]), ["recorded_mismatch"])

    # precision_loss on the training series: none at steps 0-1; from step 2 on unfused fp16 only
    # (the fused kernel keeps the scores in fp32).
    def test_cli_scan_train_precision_loss_unfused_only_from_step_2(self):
        doc = self.cli_json("scan", "--json", SAMPLE, "--case", "/train/step_00[0-4]/*", exit=1)
        lossy = [c["path"] for c in doc["cases"]
                 if any(f["kind"] == "precision_loss" for f in c["findings"])]
        self.assertEqual(lossy[:2], ["/train/step_002/layer_02", "/train/step_002/layer_03"])
        self.assertEqual([(c["path"], f["tensor"], f["modes"]) for c in doc["cases"]
                          for f in c["findings"]
                          if f["kind"] == "precision_loss" and f["modes"] != ["unfused"]], [])
        findings = by_path(doc)["/train/step_002/layer_02"]["findings"]
        self.assertEqual(sorted((f["tensor"], f["severity"]) for f in findings),
                         [("O", "warning"), ("dK", "warning")])

    def test_cli_scan_healthy_case_exit_0(self):
        run = self.cli("scan", SAMPLE, "--case", "/healthy_b2_h8_s1024", exit=0)
        self.assertInStdout(run, "1 case scanned", "0 errors, 0 warnings")

    def test_cli_scan_table_lists_findings_and_remedies(self):
        run = self.cli("scan", SAMPLE, exit=1)
        self.assertInStdout(run, "37 cases scanned", "/fp16_score_overflow",
                            "error  score_overflow  S  batch 0, head 3, rows 12-40  [unfused fp16]",
                            "remedy: lower the scale or normalise q and k")

    def test_cli_scan_reads_a_batch_broadcast_call(self):
        """A learned-query pooling call (q batch 1 against k / v batch 4), as attnscope_record
        writes it, is read with q repeated over the batch and its recorded dq (the sum over the
        batch) compared with the replay's summed dq; a NaN in layer 0 reaches it forward."""
        with tempfile.TemporaryDirectory() as tmp:
            dump = os.path.join(tmp, "pooling.h5")
            subprocess.run([sys.executable, RECORD_POOLING, dump], check=True, timeout=300,
                           env=dict(os.environ, PYTHONPATH=PYTHON_PACKAGE))
            run = self.cli("scan", dump, exit=0)
            self.assertNotIn("skipped", run.stderr)
            self.assertInStdout(run, "2 cases scanned", "/step_000000/layer_01  B=4 H=2 Sq=4")
            doc = self.cli_json("scan", "--json", dump, exit=0)
            pooling = by_path(doc)["/step_000000/layer_01"]
            compared = {r["tensor"]: r["within_rule"] for r in pooling["stats"]["recorded"]}
            self.assertEqual(compared, {"o": True, "dq": True, "dk": True, "dv": True})
            bad = os.path.join(tmp, "pooling_nan.h5")
            subprocess.run([sys.executable, RECORD_POOLING, bad, "--nan"], check=True,
                           timeout=300, env=dict(os.environ, PYTHONPATH=PYTHON_PACKAGE))
            first = self.cli_json("scan", "--json", bad, exit=1)["first_bad"]
            self.assertEqual((first["path"], first["forward_into"], first["unread"]),
                             ("/step_000000/layer_00", ["/step_000000/layer_01"], 0))

    def test_cli_scan_reads_shared_keys_broadcast_over_the_batch(self):
        """k / v with batch 1 against q of batch 3 (one memory shared by every row): the
        recorded dk / dv, summed over the batch, match the replay's sum; 10x on one kv head of
        the recorded dk is found there."""
        import torch  # the real SDPA writes the recording

        g = torch.Generator().manual_seed(0)
        q = torch.randn(3, 2, 5, 8, generator=g, requires_grad=True)
        k, v = (torch.randn(1, 2, 7, 8, generator=g, requires_grad=True) for _ in range(2))
        do = torch.randn(3, 2, 5, 8, generator=g)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        o.backward(do)
        with tempfile.TemporaryDirectory() as tmp:
            dump = os.path.join(tmp, "shared_kv.h5")
            for name, factor in (("clean", 1.0), ("bad", 10.0)):
                dk = k.grad.clone()
                dk[0, 1] *= factor
                with h5py.File(dump, "w") as f:
                    case = f.create_group(name)
                    for n, t in dict(q=q, k=k, v=v, do=do, o=o, dq=q.grad, dk=dk,
                                     dv=v.grad).items():
                        case.create_dataset(n, data=t.detach().numpy())
                doc = self.cli_json("scan", "--json", dump, exit=0 if factor == 1 else 1)
                case = doc["cases"][0]
                self.assertEqual((case["shape"]["batch"], case["shape"]["kv_broadcast"]),
                                 (3, True))
                compared = {r["tensor"]: r["within_rule"] for r in case["stats"]["recorded"]}
                self.assertEqual(compared, {"o": True, "dq": True, "dk": factor == 1,
                                            "dv": True}, name)
                if factor != 1:
                    bad = [f for f in case["findings"] if f["kind"] == "recorded_mismatch"]
                    self.assertEqual([(f["tensor"], f["batch"], f["head"]) for f in bad],
                                     [("dk", 0, 1)])

    def test_cli_scan_lists_a_call_it_cannot_read_and_exits_2(self):
        """A recorded call whose k does not fit its q (head_dim 8 against 16) is not a case
        attnscope reads; scan names it in the table's stderr and in JSON broken and exits 2
        instead of scanning the other layer alone with exit 0; a first bad case notes that the
        unread call may have gone wrong before it."""
        with tempfile.TemporaryDirectory() as tmp:
            def record(path, *args):
                subprocess.run([sys.executable, RECORD_POOLING, path, *args], check=True,
                               timeout=300, env=dict(os.environ, PYTHONPATH=PYTHON_PACKAGE))
                with h5py.File(path, "r+") as f:
                    k = f["/step_000000/layer_01/k"]
                    cut = k[..., :8]
                    del f["/step_000000/layer_01/k"]
                    f["/step_000000/layer_01"].create_dataset("k", data=cut)

            dump = os.path.join(tmp, "pooling.h5")
            record(dump)
            run = self.cli("scan", dump, exit=2)
            self.assertIn("skipped /step_000000/layer_01/k, it cannot be read as a case", run.stderr)
            self.assertIn("head_dim D 8 in [4, 2, 32, 8] does not match 16 in q [1, 2, 4, 16]",
                          run.stderr)
            self.assertIn("1 case scanned", run.stdout)
            doc = self.cli_json("scan", "--json", dump, exit=2)
            self.assertEqual([c["path"] for c in doc["cases"]], ["/step_000000/layer_00"])
            self.assertEqual([b["path"] for b in doc["broken"]], ["/step_000000/layer_01/k"])
            # Naming the layer selects its refusal too; naming the other layer does not.
            named = self.cli("scan", dump, "--case", "/step_000000/layer_01", exit=2)
            self.assertIn("skipped /step_000000/layer_01/k", named.stderr)
            other = self.cli("scan", dump, "--case", "/step_000000/layer_00", exit=0)
            self.assertNotIn("skipped", other.stderr)
            self.assertEqual(doc["first_bad"], None)
            # With an error in layer 0 the first bad case says the unread call may come first.
            bad = os.path.join(tmp, "pooling_nan.h5")
            record(bad, "--nan")
            run = self.cli("scan", bad, exit=2)
            self.assertInStdout(run, "first bad case: step 0, layer 0")
            self.assertInStdout(run, "note: 1 case could not be read (see the skipped messages); "
                                "any of them may have gone wrong before it")
            first = self.cli_json("scan", "--json", bad, exit=2)["first_bad"]
            self.assertEqual((first["path"], first["unread"]), ("/step_000000/layer_00", 1))
            self.assertIn("could not be read", first["unread_note"])

    def test_cli_scan_what_if_says_whether_it_reproduces_the_recording(self):
        """A what-if is also a hypothesis test: JSON config.what_if_explains lists the recorded
        outputs the what-if reproduces, the table says it in words; as recorded, neither."""
        case = f"{SAMPLE}::/recorded_mismatch"
        doc = self.cli_json("scan", "--json", case, "--scale", "1", exit=1)
        self.assertEqual(doc["cases"][0]["config"]["what_if_explains"], [])
        run = self.cli("scan", case, "--scale", "1", exit=1)
        self.assertInStdout(run, "the what-if reproduces none of the recorded outputs")
        doc = self.cli_json("scan", "--json", case, exit=1)
        self.assertNotIn("what_if_explains", doc["cases"][0]["config"])

    def test_cli_scan_clip_reports_norms_before_and_after(self):
        doc = self.cli_json("scan", "--json", f"{SAMPLE}::/exploding_grad", "--clip", "1", exit=0)
        case = doc["cases"][0]
        self.assertEqual(case["config"]["clip_norm"], 1)
        clips = case["stats"]["clip"]
        self.assertEqual([len(c["coef"]) for c in clips], [1, 1])
        self.assertEqual([(c["coef"][0], c["total_norm_after"]) for c in clips
                          if not (1e-6 < c["coef"][0] < 1e-5
                                  and abs(c["total_norm_after"] - 1) < 1e-2)], [],
                         "(coef, total_norm_after) out of range")
        self.assertEqual([(c["head_norms_before"]["dq"][5], c["head_norms_after"]["dq"][5])
                          for c in clips if not (c["head_norms_before"]["dq"][5] > 1e4
                                                 and c["head_norms_after"]["dq"][5] < 1)], [],
                         "(before, after) dq norm of head 5 out of range")

    def test_cli_scan_bf16_padding_attends_uniformly_warning(self):
        doc = self.cli_json("scan", "--json", SAMPLE, "--case", "/padding_mask_fp16",
                            "--precision", "bf16", exit=0)
        case = doc["cases"][0]
        self.assertEqual([(f["kind"], f["severity"]) for f in case["findings"]],
                         [("fully_masked_row", "warning")])
        self.assertEqual(case["config"]["precision"], "bf16")

    def test_cli_scan_unknown_case_exit_2(self):
        run = self.cli("scan", SAMPLE, "--case", "/no_such_case", exit=2)
        self.assertInStderr(run, "seed_cases.h5", "/no_such_case", "hint:")

    def test_cli_scan_missing_file_exit_2(self):
        run = self.cli("scan", os.path.join(self.scratch(), "no_such_dump.h5"), exit=2)
        self.assertInStderr(run, "no_such_dump.h5")

    def test_cli_scan_bad_precision_exit_2(self):
        run = self.cli("scan", SAMPLE, "--precision", "fp8", exit=2)
        self.assertInStderr(run, "bad --precision 'fp8'")

    def test_cli_scan_case_glob_selects_steps_5_to_7(self):
        doc = self.cli_json("scan", "--json", SAMPLE, "--case", "/train/step_00[5-7]/*",
                            "--threads", "2", "--mode", "fused", exit=0)
        self.assertEqual([c["path"] for c in doc["cases"]],
                         [f"/train/step_00{s}/layer_0{l}" for s in (5, 6, 7) for l in range(4)])

    def test_cli_scan_case_ref_without_leading_slash(self):
        doc = self.cli_json("scan", "--json", f"{SAMPLE}::exploding_grad", exit=0)
        self.assertEqual([c["path"] for c in doc["cases"]], ["/exploding_grad"])

    def test_cli_scan_new_option_spellings(self):
        doc = self.cli_json("scan", "--json", f"{SAMPLE}::/padding_mask_fp16", "--precision",
                            "fp32", "--mask-fill", "safe", "--scale", "0.125", "--clip", "1",
                            "--mode", "unfused", exit=0)
        self.assertEqual(doc["cases"][0]["config"]["precision"], "fp32")

    def test_cli_scan_precision_recorded_uses_dtype(self):
        doc = self.cli_json("scan", "--json", f"{SAMPLE}::/exploding_grad", "--precision",
                            "recorded", "--mask-fill", "min", exit=0)
        self.assertEqual(doc["cases"][0]["config"]["precision"], "bf16")

    # A case whose data cannot be read: the message names the file once, then the dataset.
    # With a probe that refuses at open, attnscope-cli's own reader meets the error.
    def test_cli_scan_load_error_names_the_file_once(self):
        run = self.cli("scan", BAD_DATA, env={"ATTNSCOPE_PROBE": REFUSING_PROBE}, exit=2)
        self.assertInStderr(run, f"attnscope-cli scan: {BAD_DATA}: /case/q: cannot read the data "
                                 "(HDF5: inflate() failed)\n  hint: ")

    def test_cli_scan_refuses_unreadable_data_via_the_probe(self):
        run = self.cli("scan", BAD_DATA, exit=2)
        self.assertInStderr(run, f"attnscope-cli scan: {BAD_DATA}: /case/q: cannot read the data "
                                 "(HDF5: inflate() failed) (found by attnscope's probe)\n  hint: ")


if __name__ == "__main__":
    unittest.main()
