"""attnscope-cli on packed sequences (THD + cu_seqlens, DESIGN §2): the bundled sample
resources/samples/packed_sequences.h5 (a NaN in one document of a varlen batch, an SDPA
packing whose causal mask leaks across documents), a fully masked row written by h5py into one
sequence of a packed batch, and a packed torch.save file converted to HDF5."""
import os

import h5py
import numpy as np

from cli_support import DATA, CliTestCase, by_path, kinds_of

HERE = os.path.dirname(os.path.abspath(__file__))
PACKED_SAMPLE = os.path.normpath(
    os.path.join(HERE, "..", "..", "resources", "samples", "packed_sequences.h5"))
PACKED_PT = os.path.join(os.environ["ATTNSCOPE_BUG_REPORTS"], "..", "packed", "packed.pt")


class PackedSequences(CliTestCase):
    def test_cli_packed_sample_locates_each_finding_in_its_sequence(self):
        doc = self.cli_json("scan", PACKED_SAMPLE, "--json", exit=1)
        cases = by_path(doc)
        self.assertEqual(sorted(cases), sorted(
            "/packed_%s/seq_%d" % (group, i)
            for group in ("varlen_nan_k", "sdpa_causal_mask") for i in range(4)))
        # The NaN in k at token 60 is in document 2 (tokens 52-99) only, at its key 8.
        for i in range(4):
            varlen = cases["/packed_varlen_nan_k/seq_%d" % i]
            self.assertEqual(varlen["config"]["packed"]["index"], i)
            if i != 2:
                self.assertEqual(varlen["findings"], [], varlen["path"])
        nan = cases["/packed_varlen_nan_k/seq_2"]
        self.assertEqual(nan["config"]["packed"]["q_tokens"], [52, 100])
        self.assertIn("nonfinite_input", kinds_of(nan))
        first = [f for f in nan["findings"] if f["kind"] == "nonfinite_input"][0]
        self.assertEqual(first["tensor"], "k")
        self.assertEqual(first["rows"], [8, 8])
        self.assertIn("packed sequence 2 of 4: query tokens 52-99", first["message"])
        self.assertNotIn("recorded_mismatch", kinds_of(nan))
        # The causal mask not reset per document: every document after the first leaks.
        for i, (begin, rows) in enumerate(((0, 0), (32, 20), (52, 48), (100, 12))):
            leaky = cases["/packed_sdpa_causal_mask/seq_%d" % i]
            if i == 0:
                self.assertEqual(leaky["findings"], [])
                continue
            self.assertEqual(kinds_of(leaky), ["cross_sequence_attention"])
            f = leaky["findings"][0]
            self.assertEqual(f["severity"], "error")
            self.assertEqual(f["count"], rows * begin)  # each row sees every earlier token
            self.assertIn("lets %d query rows" % rows, f["message"])
            self.assertIn("query tokens %d-" % begin, f["message"])

    def test_cli_packed_fully_masked_row_is_located_in_its_sequence(self):
        lengths, heads, dim = (6, 5, 7), 2, 8
        total = sum(lengths)
        starts = np.cumsum((0,) + lengths).astype(np.int32)
        mask = np.zeros((total, total), bool)
        for a, b in zip(starts[:-1], starts[1:]):
            mask[a:b, a:b] = True
        mask[starts[1] + 3, :] = False  # row 3 of sequence 1 sees no key
        rng = np.random.default_rng(5)
        path = os.path.join(DATA, "packed_masked_row.h5")
        with h5py.File(path, "w") as f:
            g = f.create_group("layer_0")
            for name in ("q", "k", "v"):
                g[name] = rng.standard_normal((total, heads, dim)).astype(np.float32)
            g["mask"], g["cu_seqlens_q"] = mask, starts
            g.attrs["layout"] = "THD"
        cases = by_path(self.cli_json("scan", path, "--json", exit=1))
        self.assertEqual(len(cases), 3)
        self.assertEqual(cases["/layer_0/seq_0"]["findings"], [])
        self.assertEqual(cases["/layer_0/seq_2"]["findings"], [])
        masked = [f for f in cases["/layer_0/seq_1"]["findings"]
                  if f["kind"] == "fully_masked_row"]
        self.assertEqual(len(masked), 1)
        self.assertEqual(masked[0]["rows"], [3, 3])
        self.assertIn("query tokens 6-10", masked[0]["message"])
        self.assertIn("row r = query token 6 + r", masked[0]["message"])

    def test_cli_packed_pt_converts_to_sequences_that_scan_alike(self):
        out = os.path.join(DATA, "packed_converted.h5")
        if os.path.exists(out):
            os.remove(out)
        self.cli("convert", PACKED_PT, "--out", out, exit=0)
        source = by_path(self.cli_json("scan", PACKED_PT, "--json", exit=0))
        converted = by_path(self.cli_json("scan", out, "--json", exit=0))
        self.assertEqual(sorted(source), ["/layer_0/seq_%d" % i for i in range(3)])
        self.assertEqual(sorted(converted), sorted(source))
        for path, case in source.items():
            self.assertEqual(converted[path]["shape"], case["shape"])
            self.assertEqual(converted[path]["findings"], case["findings"])
            self.assertEqual(converted[path]["config"]["causal_align"], "bottom_right")
