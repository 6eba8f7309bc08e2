"""attnscope-cli on the files users attach to bug reports (fixture bug_report_files of tests/io:
written by torch.save, numpy.savez and safetensors themselves): the findings of a .pt holding a
NaN, `convert` to HDF5 scanning identically to its source and never replacing its input, and a
.pt whose pickle calls os.system refused (exit 2, the global named) without the call running."""
import hashlib
import json
import os
import pickle
import shutil
import unittest
import zipfile

from cli_support import DATA, CliTestCase

REPORTS = os.environ["ATTNSCOPE_BUG_REPORTS"]


def report(name):
    return os.path.join(REPORTS, name)


def scratch(name):
    path = os.path.join(DATA, "bug_reports", name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class CliBugReportTest(CliTestCase):
    def test_cli_bug_report_scan_finds_the_nan_in_q_of_a_pt(self):
        doc = self.cli_json("scan", "--json", report("nan_in_q.pt"), exit=1)
        self.assertEqual([c["path"] for c in doc["cases"]], ["/case"])
        inputs = [f for f in doc["cases"][0]["findings"] if f["kind"] == "nonfinite_input"]
        self.assertEqual(len(inputs), 1, json.dumps(doc["cases"][0]["findings"], indent=1))
        nan = inputs[0]
        self.assertEqual((nan["tensor"], nan["severity"], nan["batch"], nan["head"]),
                         ("q", "error", 0, 1))
        self.assertEqual((nan["rows"], nan["count"]), ([5, 5], 1))
        self.assertEqual(doc["first_bad"]["path"], "/case")

    def test_cli_bug_report_info_lists_each_format(self):
        expected = {"flat_fp32.pt": ["/case"], "list_of_dicts.pt": ["/0", "/1", "/2"],
                    "nested_layers.pt": ["/step_3/layer_2", "/step_3/layer_10"],
                    "sdpa.npz": ["/case"], "sdpa_compressed.npz": ["/layer_0", "/layer_1"],
                    "sdpa_st.safetensors": ["/layers/0", "/layers/1"]}
        formats = {".pt": "pt", ".npz": "npz", ".safetensors": "safetensors"}
        for name, paths in expected.items():
            doc = self.cli_json("info", "--json", report(name), exit=0)
            self.assertEqual([c["path"] for c in doc["cases"]], paths, name)
            self.assertEqual(doc["format"], formats[os.path.splitext(name)[1]])
        doc = self.cli_json("info", "--json", report("bf16_views.pt"), exit=0)
        case = doc["cases"][0]
        self.assertEqual(case["tensors"]["q"]["dtype"], "bfloat16")
        self.assertEqual(case["config"]["scale"], 0.375)
        self.assertIs(case["config"]["causal"], True)

    def test_cli_bug_report_convert_scans_identically_to_its_source(self):
        out = scratch("convert")
        for name in ("nan_in_q.pt", "bf16_views.pt", "sdpa_compressed.npz",
                     "sdpa_st.safetensors"):
            converted = os.path.join(out, name + ".h5")
            run = self.cli("convert", report(name), "--out", converted, exit=0)
            self.assertInStdout(run, "to " + converted)
            source = run_json(self, report(name))
            again = run_json(self, converted)
            self.assertEqual(again["exit"], source["exit"], name)
            for doc in (source, again):
                for key in ("file", "seconds", "exit"):
                    doc.pop(key, None)
            self.assertEqual(again, source, name)

    def test_cli_bug_report_convert_never_replaces_its_input(self):
        out = scratch("convert_input")
        source = os.path.join(out, "dump.pt")
        shutil.copy(report("flat_fp32.pt"), source)
        before = digest(source)
        run = self.cli("convert", source, "--out", source, exit=2)
        self.assertIn("is the input file", run.stderr)
        self.assertEqual(digest(source), before)
        self.assertEqual(os.listdir(out), ["dump.pt"])
        run = self.cli("convert", report("armed_os_system.pt"), "--out",
                       os.path.join(out, "x.h5"), exit=2)
        self.assertEqual(sorted(os.listdir(out)), ["dump.pt"])

    def test_cli_bug_report_pickle_calling_os_system_never_runs(self):
        # Python's own pickler writes the payload (GLOBAL posix.system + REDUCE at protocol 2,
        # STACK_GLOBAL at 4) into a torch.save-style archive; Python's unpickler runs it.
        out = scratch("armed")
        marker = os.path.join(out, "payload_ran")
        armed = {protocol: os.path.join(out, "protocol_%d.pt" % protocol) for protocol in (2, 4)}
        for protocol, path in armed.items():
            with zipfile.ZipFile(path, "w") as z:
                z.writestr("archive/data.pkl", pickle.dumps({"q": Payload(marker)}, protocol))
                z.writestr("archive/byteorder", "little")
        for protocol, path in armed.items():
            for command in ("scan", "convert"):
                extra = ["--out", os.path.join(out, "out.h5")] if command == "convert" else []
                run = self.cli(command, path, *extra, exit=2)
                self.assertIn(path + ": archive/data.pkl: refuses the global 'posix.system'",
                              run.stderr)
                self.assertIn("hint: the file would run code when loaded", run.stderr)
                self.assertFalse(os.path.exists(marker), command + " ran the payload")
        self.assertEqual(sorted(os.listdir(out)), ["protocol_2.pt", "protocol_4.pt"])
        # The files are armed: Python's unpickler runs the payload.
        with zipfile.ZipFile(armed[4]) as z:
            pickle.loads(z.read("archive/data.pkl"))
        self.assertTrue(os.path.exists(marker), "the test pickle is not armed")


class Payload:
    """Unpickling it runs `touch PATH`, as a hostile .pt runs os.system."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, ("touch " + self.path,))


def run_json(test, path):
    """scan --json of `path` with its exit code under "exit"."""
    from cli_support import run_cli
    run = run_cli("scan", "--json", path)
    doc = test.json_of(run)
    doc["exit"] = run.returncode
    return doc


if __name__ == "__main__":
    unittest.main()
