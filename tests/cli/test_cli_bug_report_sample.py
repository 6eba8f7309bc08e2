"""The bundled bug-report file resources/samples/eager_fp16_nan_grad.pt: regenerating it with
app/samples/make_bug_report_sample.py (torch.save) gives the same archive members (all but the
serialization id, which torch draws anew), and attnscope-cli finds its NaN source: the fully
padded query rows of batch 1, with the recorded NaN outputs and gradients matching the replay."""
import os
import subprocess
import sys
import zipfile

from cli_support import DATA, CliTestCase, by_path, kinds_of

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SAMPLE_PT = os.path.join(ROOT, "resources", "samples", "eager_fp16_nan_grad.pt")
GENERATOR = os.path.join(ROOT, "app", "samples", "make_bug_report_sample.py")


def members(path):
    """{member name: bytes} of a torch.save archive, without its serialization id."""
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist() if not n.endswith(".data/serialization_id")}


class BugReportSample(CliTestCase):
    def test_cli_bug_report_sample_is_what_its_generator_writes(self):
        out_dir = os.path.join(DATA, "bug_report_sample")
        os.makedirs(out_dir, exist_ok=True)
        fresh = os.path.join(out_dir, os.path.basename(SAMPLE_PT))
        subprocess.run([sys.executable, GENERATOR, fresh], check=True)
        committed, regenerated = members(SAMPLE_PT), members(fresh)
        self.assertEqual(sorted(committed), sorted(regenerated))
        for name, data in committed.items():
            self.assertEqual(data, regenerated[name], name + " differs: regenerate the sample")

    def test_cli_bug_report_sample_scan_finds_the_padded_rows(self):
        case = by_path(self.cli_json("scan", SAMPLE_PT, "--json", exit=1))["/case"]
        self.assertEqual(case["config"]["precision"], "fp16")
        self.assertEqual(kinds_of(case), ["clip_spreads_nan", "fully_masked_row",
                                          "nonfinite_gradient", "nonfinite_output"])
        masked = [f for f in case["findings"] if f["kind"] == "fully_masked_row"][0]
        self.assertEqual((masked["batch"], masked["rows"]), (1, [40, 63]))
        info = by_path(self.cli_json("info", SAMPLE_PT, "--json", exit=0))["/case"]
        self.assertEqual(info["recorded"], ["o", "dq", "dk", "dv"])
