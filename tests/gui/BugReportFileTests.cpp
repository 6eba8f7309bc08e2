// Bug-report files (issue 16) opened in the real window the way a user opens them (the probe,
// then the reader chosen by the file's first bytes): a torch.save .pt holding bfloat16 views
// of a packed qkv per layer, a numpy.savez_compressed .npz and a safetensors file, written at
// test time by the venv's torch, numpy and safetensors. Each lists its cases in the browser and
// computes the script's exact scores; a .pt whose pickle calls os.system opens an error dialog
// naming the refused global, and its payload never runs.
#include <QFile>
#include <QProcess>
#include <QtTest>
#include <cmath>

#include "app/gui/SessionContext.h"
#include "app/panels/DumpBrowserPanel.h"
#include "tests/gui/ViewGapTest.h"

namespace attnscope::test {
namespace {

// q / k of every case hold tensorValues(n, 1) / tensorValues(n, 2) (exact in bfloat16) laid
// out [B=1, H=2, S=4, D=8]; in the .pt they are views of a packed [1, 4, 3, 2, 8] qkv.
const char* const kScript = R"(
import os, sys, numpy as np, torch
from safetensors.torch import save_file
out = sys.argv[1]
def values(n, seed):
    i = np.arange(n)
    return ((i * 37 + seed * 11) % 101 - 50) / 16.0
q, k, v = (torch.tensor(values(64, s), dtype=torch.float32).reshape(1, 2, 4, 8) for s in (1, 2, 3))
qkv = torch.stack([q, k, v], 2).permute(0, 3, 2, 1, 4).contiguous().to(torch.bfloat16)
views = {n: qkv[:, :, i].transpose(1, 2) for i, n in enumerate(("query", "key", "value"))}
torch.save({"layer_0": views, "layer_1": views}, os.path.join(out, "report.pt"))
np.savez_compressed(os.path.join(out, "report.npz"), q=q.numpy(), k=k.numpy(), v=v.numpy())
save_file({"layers.0.q": q, "layers.0.k": k, "layers.0.v": v}, os.path.join(out, "report.st"))
class P:
    def __reduce__(self): return (os.system, ("touch " + os.path.join(out, "ran"),))
torch.save({"q": q, "k": k, "v": v, "x": P()}, os.path.join(out, "armed.pt"))
)";

// S[0, 0] of head 0: q[0] . k[0] / sqrt(8).
double firstScore() {
  const std::vector<double> q = tensorValues(8, 1), k = tensorValues(8, 2);
  double dot = 0;
  for (size_t d = 0; d < 8; ++d) dot += q[d] * k[d];
  return dot / std::sqrt(8.0);
}

}  // namespace

void ViewGapTest::bug_report_files_open_in_the_window() {
  QTemporaryDir out;
  QVERIFY(out.isValid());
  QProcess python;
  python.start(QStringLiteral(ATTNSCOPE_PYTHON),
               {QStringLiteral("-c"), QString::fromUtf8(kScript), out.path()});
  QVERIFY(python.waitForFinished(120000));
  QVERIFY2(python.exitCode() == 0, python.readAllStandardError().constData());

  const QList<std::pair<QString, QStringList>> files = {
      {QStringLiteral("report.pt"), {QStringLiteral("/layer_0"), QStringLiteral("/layer_1")}},
      {QStringLiteral("report.npz"), {QStringLiteral("/case")}},
      {QStringLiteral("report.st"), {QStringLiteral("/layers/0")}}};
  for (const auto& [name, cases] : files) {
    ShownWindow w;
    QVERIFY(w.window->openTarget({out.filePath(name), cases.back()}));
    QVERIFY(w.waitForHead(cases.back(), 0));
    QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
    QCOMPARE(w.window->browser()->casePaths(0), cases);
    const double got = w.context()->result()->s->raw.at(0);
    QVERIFY2(std::abs(got - firstScore()) <= 1e-6 * std::abs(firstScore()),
             qPrintable(name + QStringLiteral(": S[0,0] = %1").arg(got)));
  }

  ShownWindow w;
  QVERIFY(!w.window->openTarget({out.filePath(QStringLiteral("armed.pt")), {}}));
  QCOMPARE(w.errors.size(), 1);
  QVERIFY2(w.errors[0].contains(QStringLiteral("refuses the global 'posix.system'")),
           qPrintable(w.errors[0]));
  QCOMPARE(w.context()->fileCount(), 0);
  QVERIFY(!QFile::exists(out.filePath(QStringLiteral("ran"))));
}

}  // namespace attnscope::test
