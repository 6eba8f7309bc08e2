// A dump with one unreadable case among good ones, opened in the real window: the broken case's
// row is greyed with its error (file, dataset, problem, hint) as tooltip, the good cases open and
// compute exactly, and selecting the broken row reports an error naming it instead of crashing.
// The files are written at test time by tests/data/broken_case_dumps.py (the venv's python):
// one_unreadable_case.h5 (H5Dread fails on /step_2/q) and one_crashing_case.h5 (libhdf5 crashes
// on /step_2/q, contained by the probe process). A group rejected as a case (k's head_dim differs
// from q's) is listed once under its file: the row names the dataset and the problem, the tooltip
// adds the hint without repeating the path.
#include <QProcess>
#include <QTreeWidget>
#include <QTreeWidgetItemIterator>
#include <QtTest>
#include <cmath>

#include "app/gui/SessionContext.h"
#include "app/panels/DumpBrowserPanel.h"
#include "tests/gui/ViewGapTest.h"

namespace attnscope::test {
namespace {

// The browser row of `casePath`, or nullptr.
QTreeWidgetItem* caseRow(DumpBrowserPanel* browser, const QString& casePath) {
  for (QTreeWidgetItemIterator it(browser->tree()); *it; ++it) {
    if ((*it)->data(0, Qt::UserRole + 1).toString() == casePath) return *it;
  }
  return nullptr;
}

// S[0, 0] of head 0 of case /step_n: scale * q[0] . k[0], with the script's values
// (q seed 3n, k seed 3n + 1) and the default scale 1 / sqrt(D), D = 8.
double firstScore(int n) {
  const std::vector<double> q = tensorValues(8, 3 * n), k = tensorValues(8, 3 * n + 1);
  double dot = 0;
  for (size_t d = 0; d < 8; ++d) dot += q[d] * k[d];
  return dot / std::sqrt(8.0);
}

// Whether the shown result's S[0, 0] is firstScore(n) (fp32 kernel: within a few ulp).
bool showsFirstScore(const ShownWindow& w, int n) {
  const double expected = firstScore(n);
  return std::abs(w.context()->result()->s->raw.at(0) - expected) <= 1e-6 * std::abs(expected);
}

// Runs the venv's python on `args`; an empty string on success, else what went wrong.
QString runPython(const QStringList& args) {
  QProcess python;
  python.start(QStringLiteral(ATTNSCOPE_PYTHON), args);
  if (!python.waitForFinished(120000) || python.exitStatus() != QProcess::NormalExit ||
      python.exitCode() != 0) {
    return QString::fromUtf8(python.readAllStandardError()) + python.errorString();
  }
  return {};
}

}  // namespace

void ViewGapTest::broken_case_is_greyed_and_explained_in_browser() {
  QTemporaryDir out;
  QVERIFY(out.isValid());
  const QString failed = runPython({QStringLiteral(ATTNSCOPE_BROKEN_DUMPS_SCRIPT), out.path()});
  QVERIFY2(failed.isEmpty(), qPrintable(failed));

  // File -> the problem its /step_2 row names (after "FILE: /step_2/q: ").
  const QList<std::pair<QString, QString>> files = {
      {QStringLiteral("one_unreadable_case.h5"),
       QStringLiteral("cannot read the data (HDF5: inflate() failed)")},
      {QStringLiteral("one_crashing_case.h5"),
       QStringLiteral("while reading the dataset's data (in attnscope's probe process)")}};
  for (const auto& [name, problem] : files) {
    const QString path = out.filePath(name);
    ShownWindow w;
    QVERIFY(w.window->openTarget({path, QStringLiteral("/step_0")}));
    QVERIFY(w.waitForHead(QStringLiteral("/step_0"), 0));
    QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
    DumpBrowserPanel* browser = w.window->browser();
    QCOMPARE(browser->casePaths(0),
             QStringList({QStringLiteral("/step_0"), QStringLiteral("/step_1"),
                          QStringLiteral("/step_2"), QStringLiteral("/step_3")}));

    // The broken row: greyed in every column, its error as tooltip; the good rows are not.
    QTreeWidgetItem* broken = caseRow(browser, QStringLiteral("/step_2"));
    QTreeWidgetItem* good = caseRow(browser, QStringLiteral("/step_3"));
    QVERIFY(broken != nullptr && good != nullptr);
    const QColor grey = browser->tree()->palette().color(QPalette::Disabled, QPalette::Text);
    for (int column = 0; column < 3; ++column) {
      QCOMPARE(broken->foreground(column).color(), grey);
      QVERIFY(good->foreground(column).color() != grey);
    }
    const QString tip = broken->toolTip(0);
    QVERIFY2(tip.startsWith(path + QStringLiteral(": /step_2/q: ")), qPrintable(tip));
    QVERIFY2(tip.contains(problem), qPrintable(tip));
    QVERIFY2(tip.contains(QStringLiteral("(hint: ")) && tip.contains(QStringLiteral("re-export")),
             qPrintable(tip));
    // A readable row: its path, shape and dtype, then its scan status.
    QVERIFY2(good->toolTip(0).startsWith(QStringLiteral("/step_3\nB1 ")),
             qPrintable(good->toolTip(0)));
    QVERIFY2(good->toolTip(0).endsWith(browser->caseStatus(0, QStringLiteral("/step_3"))),
             qPrintable(good->toolTip(0)));

    // The good cases compute the script's exact values.
    QVERIFY(showsFirstScore(w, 0));
    browser->tree()->setCurrentItem(good);
    QVERIFY(w.waitForHead(QStringLiteral("/step_3"), 0));
    QVERIFY(showsFirstScore(w, 3));
    QVERIFY(w.errors.isEmpty());

    // Selecting the broken row: an error naming the case and its problem; /step_3 stays shown.
    browser->tree()->setCurrentItem(broken);
    QCOMPARE(w.errors.size(), 1);
    QVERIFY2(w.errors[0].startsWith(QStringLiteral("Cannot show /step_2: ") + path +
                                    QStringLiteral(": /step_2/q: ")),
             qPrintable(w.errors[0]));
    QVERIFY2(w.errors[0].contains(problem), qPrintable(w.errors[0]));
    QCOMPARE(w.context()->casePath(), QStringLiteral("/step_3"));
    browser->tree()->setCurrentItem(caseRow(browser, QStringLiteral("/step_1")));
    QVERIFY(w.waitForHead(QStringLiteral("/step_1"), 0));
    QVERIFY(showsFirstScore(w, 1));
    QCOMPARE(w.errors.size(), 1);
  }
}

void ViewGapTest::rejected_group_row_names_it_once() {
  QTemporaryDir out;
  QVERIFY(out.isValid());
  const QString path = out.filePath(QStringLiteral("rejected.h5"));
  const QString failed =
      runPython({QStringLiteral("-c"),
                 QStringLiteral("import sys, h5py, numpy as np\n"
                                "with h5py.File(sys.argv[1], 'w') as f:\n"
                                "    for g, d in (('good', 2), ('bad', 3)):\n"
                                "        f[g + '/q'] = np.ones((1, 1, 4, 2), np.float32)\n"
                                "        f[g + '/k'] = np.ones((1, 1, 4, d), np.float32)\n"
                                "        f[g + '/v'] = np.ones((1, 1, 4, 2), np.float32)\n"),
                 path});
  QVERIFY2(failed.isEmpty(), qPrintable(failed));
  ShownWindow w;
  QVERIFY(w.window->openTarget({path, QStringLiteral("/good")}));
  QVERIFY(w.errors.isEmpty());
  QTreeWidgetItem* file = w.window->browser()->tree()->topLevelItem(0);
  QVERIFY(file != nullptr);
  QTreeWidgetItem* rejected = file->child(file->childCount() - 1);
  QCOMPARE(rejected->text(0), QStringLiteral("rejected groups (1)"));
  QCOMPARE(rejected->childCount(), 1);
  const QString problem =
      QStringLiteral("head_dim D 3 in [1, 1, 4, 3] does not match 2 in q [1, 1, 4, 2]");
  QCOMPARE(rejected->child(0)->text(0), QStringLiteral("/bad/k: ") + problem);
  QCOMPARE(rejected->child(0)->toolTip(0),
           problem + QStringLiteral("\nhint: shapes follow DESIGN §2: q [B,H,Sq,D], k [B,Hk,Sk,D], "
                                    "v [B,Hk,Sk,Dv] (layout BHSD; BSHD swaps S and H)"));
}

}  // namespace attnscope::test
