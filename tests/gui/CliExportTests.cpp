// attnscope-cli export as a real process without a display (stamped PNG / PDF / SVG, sidecar
// annotations, exit 2 on bad input, a kill mid-export), and the GUI's error dialog on every dump
// of the hostile corpus tests/data/bad/.
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProcess>
#include <QtTest>
#include <vector>

#include "app/gui/AnalysisController.h"
#include "app/gui/SessionContext.h"
#include "app/panels/ControlsPanel.h"
#include "app/panels/HeatmapPanel.h"
#include "app/plot/Colormaps.h"
#include "app/plot/HeatmapView.h"
#include "app/plot/RangeHistogram.h"
#include "core/io/dump_probe.h"
#include "core/memory_budget.h"
#include "kernels/attn_names.h"
#include "kernels/precision.h"
#include "tests/gui/ExportTest.h"

namespace attnscope::test {
namespace {

const QString kCase = QStringLiteral("/fp16_score_overflow");

struct CliRun {
  int exitCode = -1;
  QString out, err;
};

// Runs attnscope-cli with no display and no platform set: export must pick offscreen itself.
CliRun runCli(const QStringList& arguments) {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"}) {
    env.remove(QLatin1String(name));
  }
  p.setProcessEnvironment(env);
  p.start(cliPath(), arguments);
  CliRun run;
  if (!p.waitForFinished(180000) || p.exitStatus() != QProcess::NormalExit) return run;
  run.exitCode = p.exitCode();
  run.out = QString::fromUtf8(p.readAllStandardOutput());
  run.err = QString::fromUtf8(p.readAllStandardError());
  return run;
}

QByteArray readAll(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

}  // namespace

void ExportTest::cli_export_writes_stamped_figures_headless() {
  QTemporaryDir out;
  const QString target = samplePath() + QStringLiteral("::") + kCase;
  const QStringList common = {target,
                              QStringLiteral("--precision"),
                              QStringLiteral("fp16"),
                              QStringLiteral("--mode"),
                              QStringLiteral("unfused"),
                              QStringLiteral("--head"),
                              QStringLiteral("3")};
  const QString png = out.filePath(QStringLiteral("s.png"));
  CliRun run = runCli(QStringList{QStringLiteral("export")} + common +
                      QStringList{QStringLiteral("--out"), png});
  QVERIFY2(run.exitCode == 0, qPrintable(run.err));
  QVERIFY(run.out.startsWith(QStringLiteral("wrote ") + png));
  const QImage image(png);
  // 2x the plot inside the 1000 x 820 view (toolbar and histogram excluded) plus the footer.
  QVERIFY2(image.width() > 1800 && image.width() <= 2000,
           qPrintable(QString::number(image.width())));
  QVERIFY2(image.height() > 1200 && image.height() < 1708,
           qPrintable(QString::number(image.height())));
  QCOMPARE(image.text(QStringLiteral("attnscope.view")), QStringLiteral("S"));
  QCOMPARE(image.text(QStringLiteral("attnscope.case")), kCase);
  QCOMPARE(image.text(QStringLiteral("attnscope.head")), QStringLiteral("3"));
  QCOMPARE(image.text(QStringLiteral("attnscope.precision")), QStringLiteral("fp16"));
  QCOMPARE(image.text(QStringLiteral("attnscope.mode")), QStringLiteral("unfused"));
  QCOMPARE(image.text(QStringLiteral("attnscope.scale")), QStringLiteral("0.125"));
  // The caption: the case's findings under that run, as the window's export draws them.
  QVERIFY2(image.text(QStringLiteral("attnscope.findings"))
               .startsWith(QStringLiteral("error score_overflow S b0 h3: ")),
           qPrintable(image.text(QStringLiteral("attnscope.findings"))));
  // --no-caption: the stamp alone, 5 caption lines (4 findings and "and N more") shorter.
  const QString bare = out.filePath(QStringLiteral("bare.png"));
  run = runCli(QStringList{QStringLiteral("export")} + common +
               QStringList{QStringLiteral("--no-caption"), QStringLiteral("--out"), bare});
  QVERIFY2(run.exitCode == 0, qPrintable(run.err));
  const QImage bareImage(bare);
  QVERIFY(bareImage.text(QStringLiteral("attnscope.findings")).isEmpty());
  QCOMPARE(image.height() - bareImage.height(), 2 * 13 * 5);

  // --format svg without a suffix appends one; the SVG carries the markers and the footer.
  run = runCli(QStringList{QStringLiteral("export")} + common +
               QStringList{QStringLiteral("--format"), QStringLiteral("svg"),
                           QStringLiteral("--out"), out.filePath(QStringLiteral("s"))});
  QVERIFY2(run.exitCode == 0, qPrintable(run.err));
  const QString svg = QString::fromUtf8(readAll(out.filePath(QStringLiteral("s.svg"))));
  for (const char* part :
       {"<svg", "first +inf at (12, ", "max |S| = ", "fp16 unfused", "scale 0.125", "clip off",
        "mask -inf", "error score_overflow S b0 h3"}) {
    QVERIFY2(svg.contains(QLatin1String(part)), part);
  }
  // A row plot as PDF, clipped: the stamp names the clip.
  run = runCli({QStringLiteral("export"), target, QStringLiteral("--view"), QStringLiteral("lse"),
                QStringLiteral("--clip"), QStringLiteral("1"), QStringLiteral("--out"),
                out.filePath(QStringLiteral("lse.pdf"))});
  QVERIFY2(run.exitCode == 0, qPrintable(run.err));
  const QByteArray pdf = readAll(out.filePath(QStringLiteral("lse.pdf")));
  QVERIFY(pdf.startsWith("%PDF-"));
  QVERIFY(pdf.contains("<attnscope:view>lse</attnscope:view>"));
  QVERIFY(pdf.contains("<attnscope:clip>max_norm 1 per case (total "));
}

void ExportTest::cli_export_includes_sidecar_annotations() {
  SampleCopy dump;
  const QString sidecar = dump.path + QStringLiteral(".attnscope.json");
  const QByteArray session = R"({"format": "attnscope-session", "version": 1, "cases": {
    "/fp16_score_overflow": {"batch": 0, "head": 3, "view": "S", "annotations": [
      {"kind": "box", "view": "S", "batch": 0, "head": 3, "from": [0, 12], "to": [63, 40],
       "text": "fp16 overflow band"},
      {"kind": "text", "view": "P", "batch": 0, "head": 3, "from": [1, 1], "to": [1, 1],
       "text": "only on P"},
      {"kind": "text", "view": "row l", "batch": 0, "head": 3, "from": [10, 1], "to": [10, 1],
       "text": "only on the l row plot"}]}}})";
  {
    QFile f(sidecar);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(session);
  }
  QTemporaryDir out;
  const QString svgPath = out.filePath(QStringLiteral("s.svg"));
  const CliRun run = runCli({QStringLiteral("export"), dump.path + QStringLiteral("::") + kCase,
                             QStringLiteral("--precision"), QStringLiteral("fp16"),
                             QStringLiteral("--head"), QStringLiteral("3"),
                             QStringLiteral("--no-markers"), QStringLiteral("--out"), svgPath});
  QVERIFY2(run.exitCode == 0, qPrintable(run.err));
  const QString svg = QString::fromUtf8(readAll(svgPath));
  QVERIFY(svg.contains(QStringLiteral("fp16 overflow band")));
  QVERIFY(!svg.contains(QStringLiteral("only on P")));
  QVERIFY(!svg.contains(QStringLiteral("first +inf")));
  QVERIFY(!svg.contains(QStringLiteral("only on the l row plot")));
  // A row plot draws its own annotations (the sidecar names it "row l", the CLI "l").
  const QString rowsPath = out.filePath(QStringLiteral("l.svg"));
  const CliRun rows =
      runCli({QStringLiteral("export"), dump.path + QStringLiteral("::") + kCase,
              QStringLiteral("--precision"), QStringLiteral("fp16"), QStringLiteral("--head"),
              QStringLiteral("3"), QStringLiteral("--view"), QStringLiteral("l"),
              QStringLiteral("--out"), rowsPath});
  QVERIFY2(rows.exitCode == 0, qPrintable(rows.err));
  const QString rowsSvg = QString::fromUtf8(readAll(rowsPath));
  QVERIFY(rowsSvg.contains(QStringLiteral("only on the l row plot")));
  QVERIFY(!rowsSvg.contains(QStringLiteral("fp16 overflow band")));
  // The CLI only reads the sidecar.
  QCOMPARE(readAll(sidecar), session);
}

namespace {

// The clips `attnscope-cli scan --clip 1 --clip-scope SCOPE --json` reports (stats.clip) for
// the exploding case in `mode`: their coefficients, in clip_case_gradients order.
std::vector<double> cliClipCoefs(const QString& scope, Mode mode) {
  const CliRun run =
      runCli({QStringLiteral("scan"), samplePath() + QStringLiteral("::/exploding_grad"),
              QStringLiteral("--clip"), QStringLiteral("1"), QStringLiteral("--clip-scope"), scope,
              QStringLiteral("--json")});
  const QJsonObject c = QJsonDocument::fromJson(run.out.toUtf8())
                            .object()[QStringLiteral("cases")]
                            .toArray()
                            .at(0)
                            .toObject()[QStringLiteral("stats")]
                            .toObject();
  std::vector<double> coefs;
  for (const QJsonValue clip : c[QStringLiteral("clip")].toArray()) {
    const QJsonObject o = clip.toObject();
    if (o[QStringLiteral("mode")].toString() != QLatin1String(mode_name(mode))) continue;
    for (const QJsonValue coef : o[QStringLiteral("coef")].toArray())
      coefs.push_back(coef.toDouble());
  }
  return coefs;
}

}  // namespace

void ExportTest::clip_is_the_same_in_controls_findings_heatmaps_and_cli() {
  ExportWindow w;
  QVERIFY(w.window->openTarget({samplePath(), QStringLiteral("/exploding_grad")}));
  SessionContext* context = w.window->context();
  const auto resultWith = [&](bool clipped, ClipScope scope) {
    return waitUntil([&] {
      const auto r = context->result();
      return r && r->request.head == 0 && r->clip.has_value() == clipped &&
             (!clipped || r->request.run.clip_scope == scope) &&
             w.window->analysis()->summaryCurrent();
    });
  };
  context->setHead(0);
  QVERIFY(resultWith(false, ClipScope::whole_case));
  const auto plain = context->result();
  // Unticking the dQ tab's "auto" range keeps the range shown, so the clip changes colours.
  context->showView(HeadView::dq);
  HeatmapView* dqView = w.window->heatmaps()->view(HeadView::dq);
  QVERIFY(dqView->isVisible());
  QVERIFY(dqView->grid()->raw == plain->dq.raw);
  const ColorScale before = dqView->colorScale();
  dqView->histogram()->findChild<QCheckBox*>()->setChecked(false);
  QVERIFY(!dqView->automaticRange());
  QCOMPARE(dqView->colorScale().lo, before.lo);
  QCOMPARE(dqView->colorScale().hi, before.hi);
  QCOMPARE(dqView->beyondRangeCells(), countBeyondRange(before, dqView->grid()->value));
  w.window->controls()->clipEdit()->setText(QStringLiteral("1"));
  w.window->controls()->clipBox()->setChecked(true);
  QVERIFY(resultWith(true, ClipScope::whole_case));
  const auto clipped = context->result();
  const ClipResult& c = *clipped->clip;
  // One clip over the whole case: head 0 alone has a tiny norm, the case a huge one.
  QVERIFY2(c.total_norm > 1e3, qPrintable(QString::number(c.total_norm)));
  QVERIFY(c.coef < 1e-3);
  // The findings' summary and the CLI clip with the very same coefficient.
  const auto summary = w.window->analysis()->summary();
  QCOMPARE(summary->clips.size(), size_t{1});
  QCOMPARE(summary->clips.front().coef, c.coef);
  QCOMPARE(summary->clips.front().total_norm, c.total_norm);
  QCOMPARE(cliClipCoefs(QStringLiteral("case"), clipped->request.mode()),
           std::vector<double>{c.coef});
  QVERIFY(w.window->controls()->clipReport()->text().contains(
      QStringLiteral("case: total norm %1").arg(QString::number(c.total_norm, 'g', 6))));
  // The dQ tab shows head 0's gradients times that coefficient, rounded as clip_grad_norm_
  // stores them.
  QCOMPARE(clipped->dq.raw.size(), plain->dq.raw.size());
  for (size_t i = 0; i < plain->dq.raw.size(); ++i) {
    const float want = round_to(clipped->precision, plain->dq.raw[i] * static_cast<float>(c.coef));
    QCOMPARE(clipped->dq.raw[i], want);
  }
  QVERIFY(dqView->grid()->raw == clipped->dq.raw);
  QCOMPARE(dqView->colorScale().lo, before.lo);
  QCOMPARE(dqView->colorScale().hi, before.hi);
  QCOMPARE(dqView->beyondRangeCells(), countBeyondRange(before, dqView->grid()->value));

  // Per kv head: the coefficient of head 0's group, as the CLI computes it.
  const int index =
      w.window->controls()->clipScopeBox()->findData(static_cast<int>(ClipScope::per_kv_head));
  w.window->controls()->clipScopeBox()->setCurrentIndex(index);
  emit w.window->controls()->clipScopeBox()->activated(index);
  QVERIFY(resultWith(true, ClipScope::per_kv_head));
  const ClipResult& g = *context->result()->clip;
  const std::vector<double> groups =
      cliClipCoefs(QStringLiteral("kv-head"), clipped->request.mode());
  QVERIFY(!groups.empty());
  QCOMPARE(g.coef, groups.front());  // batch 0, kv head 0
  QCOMPARE(w.window->analysis()->summary()->clips.size(), groups.size());
  QVERIFY(w.errors.isEmpty());
}

void ExportTest::cli_export_rejects_bad_input_with_exit_2() {
  QTemporaryDir out;
  const QString target = samplePath() + QStringLiteral("::") + kCase;
  const QString png = out.filePath(QStringLiteral("x.png"));
  QFile notDump(out.filePath(QStringLiteral("not_a_dump.h5")));
  QVERIFY(notDump.open(QIODevice::WriteOnly));
  notDump.write("plain text, not HDF5\n");
  notDump.close();
  const struct {
    QStringList args;
    const char* message;
  } cases[] = {
      {{target, QStringLiteral("--view"), QStringLiteral("Z"), QStringLiteral("--out"), png},
       "unknown view 'Z'"},
      {{target, QStringLiteral("--format"), QStringLiteral("bmp"), QStringLiteral("--out"), png},
       "unknown format 'bmp'"},
      {{target, QStringLiteral("--format"), QStringLiteral("pdf"), QStringLiteral("--out"), png},
       "does not end in .pdf"},
      {{target}, "--out PATH is required"},
      {{target, QStringLiteral("--head"), QStringLiteral("99"), QStringLiteral("--out"), png},
       "bad --head '99'"},
      {{target, QStringLiteral("--mode"), QStringLiteral("both"), QStringLiteral("--out"), png},
       "bad --mode 'both'"},
      {{target, QStringLiteral("--bogus"), QStringLiteral("--out"), png},
       "unknown option '--bogus'"},
      {{samplePath() + QStringLiteral("::/no/such/case"), QStringLiteral("--out"), png},
       "/no/such/case"},
      {{notDump.fileName(), QStringLiteral("--out"), png}, "not_a_dump.h5"},
      {{target, QStringLiteral("--out"), QStringLiteral("/nonexistent-dir/x.png")},
       "/nonexistent-dir/x.png: cannot write"},
  };
  for (const auto& c : cases) {
    const CliRun run = runCli(QStringList{QStringLiteral("export")} + c.args);
    QVERIFY2(run.exitCode == 2, qPrintable(c.args.join(' ') + QStringLiteral(" -> ") + run.err));
    QVERIFY2(run.err.contains(QLatin1String(c.message)), qPrintable(run.err));
  }
  QVERIFY(!QFile::exists(png));
  const CliRun help = runCli({QStringLiteral("export"), QStringLiteral("--help")});
  QCOMPARE(help.exitCode, 0);
  QVERIFY(help.out.startsWith(QStringLiteral("usage: attnscope-cli export FILE[::CASE]")));
}

void ExportTest::cli_export_killed_mid_write_keeps_a_complete_file() {
  // Alternate heads 0 and 3 into one path and kill each export after a growing delay: whenever
  // the kill lands, the path holds a complete figure of one of the two heads.
  QTemporaryDir out;
  const QString png = out.filePath(QStringLiteral("s.png"));
  const QString target = samplePath() + QStringLiteral("::") + kCase;
  QVERIFY(runCli({QStringLiteral("export"), target, QStringLiteral("--out"), png}).exitCode == 0);
  int killed = 0;
  for (int round = 0; round < 12; ++round) {
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    p.setProcessEnvironment(env);
    p.start(cliPath(), {QStringLiteral("export"), target, QStringLiteral("--head"),
                        QString::number(round % 2 ? 0 : 3), QStringLiteral("--out"), png});
    QVERIFY(p.waitForStarted());
    if (!p.waitForFinished(100 * round)) {
      p.kill();
      ++killed;
    }
    p.waitForFinished();
    const QImage image(png);
    QVERIFY2(!image.isNull(), qPrintable(QStringLiteral("round %1").arg(round)));
    const QString head = image.text(QStringLiteral("attnscope.head"));
    QVERIFY2(head == QStringLiteral("0") || head == QStringLiteral("3"), qPrintable(head));
  }
  QVERIFY(killed > 0);
}

void ExportTest::bad_dumps_show_error_dialog_not_crash() {
  const QDir bad(badCorpusDir());
  const QJsonObject expected =
      QJsonDocument::fromJson(readAll(bad.filePath(QStringLiteral("expected.json")))).object();
  QVERIFY2(expected.size() >= 30, qPrintable(badCorpusDir()));
  ExportWindow w;
  const double probeTimeout = ProbeOptions::default_probe_timeout();
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    w.errors.clear();
    // An entry's "args" are what its CLI check adds, set process-wide here as the GUI's
    // --probe-timeout / ATTNSCOPE_MEMORY_BUDGET would: a file that hangs libhdf5 gets a short
    // probe timeout, one that allocates without end a small memory budget.
    const QJsonArray args = it.value()[QStringLiteral("args")].toArray();
    const QString option = args.size() == 2 ? args[0].toString() : QString();
    if (option == QStringLiteral("--probe-timeout")) {
      set_probe_timeout(args[1].toString().toDouble());
    } else if (option == QStringLiteral("--memory-budget")) {
      QVERIFY(set_memory_budget(args[1].toString().toStdString(), "--memory-budget").ok());
    } else {
      QVERIFY2(args.isEmpty(), qPrintable(it.key()));
    }
    const bool opened = w.window->openTarget({bad.filePath(it.key()), {}});
    set_probe_timeout(probeTimeout);
    clear_memory_budget();
    QVERIFY2(!opened, qPrintable(it.key()));
    QCOMPARE(w.errors.size(), 1);
    const QString& error = w.errors.front();
    // File, object (dataset or group), problem and hint, as the CLI reports them.
    for (const QString& part : {it.key(), it.value()[QStringLiteral("object")].toString(),
                                it.value()[QStringLiteral("problem")].toString()}) {
      QVERIFY2(error.contains(part), qPrintable(it.key() + QStringLiteral(": ") + error));
    }
    QVERIFY2(!error.endsWith(QStringLiteral("| hint: ")), qPrintable(error));
  }
  QCOMPARE(w.window->context()->fileCount(), 0);
  // A truncated copy of the good sample, and the real dialog: it shows without blocking and
  // names the file, the problem and a hint.
  QTemporaryDir dir;
  const QString truncated = dir.filePath(QStringLiteral("truncated_sample.h5"));
  {
    const QByteArray whole = readAll(samplePath());
    QFile f(truncated);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(whole.left(whole.size() / 3));
  }
  ExportWindow shown(/*keepDialogs=*/true);
  QVERIFY(!shown.window->openTarget({truncated, {}}));
  QMessageBox* box = nullptr;
  QTRY_VERIFY((box = shown.window->findChild<QMessageBox*>(QStringLiteral("attnscopeError"))) &&
              box->isVisible());
  QVERIFY2(box->text().contains(QStringLiteral("truncated_sample.h5")), qPrintable(box->text()));
  QVERIFY(box->informativeText().startsWith(QStringLiteral("Hint: ")));
  QVERIFY(box->informativeText().size() > 10);
  box->close();
  SampleCopy good;
  QVERIFY(shown.open(good.path, kCase, 0, Mode::fused));
}

}  // namespace attnscope::test
