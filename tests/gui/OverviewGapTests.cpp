// The overviews' gradient norms and failed cases, and greyed backends, on tiny dumps written
// here: ||dQ||, ||dK||, ||dV|| and ||(dQ,dK,dV)|| per (batch, head) of a GQA case (H = 2,
// Hk = 1) and per case in (step x layer) equal a direct fp64 computation of the backward pass;
// a case whose mask has the wrong shape is a red "error" cell (its tooltip says why) while the
// other cells keep their values; torch-flash-cpu is greyed with its reason on a softcapped case.
#include <QComboBox>
#include <QStandardItemModel>
#include <QtTest>
#include <cmath>

#include "app/gui/AnalysisController.h"
#include "app/gui/SessionContext.h"
#include "app/gui/TaskRunner.h"
#include "app/panels/ControlsPanel.h"
#include "app/panels/OverviewPanel.h"
#include "app/plot/AnnotationLayer.h"
#include "app/plot/HeatmapView.h"
#include "core/io/hdf5_dump.h"
#include "tests/gui/ViewGapTest.h"

namespace attnscope::test {
namespace {

constexpr int64_t kH = 2, kSq = 3, kSk = 4, kD = 2;  // B = 1, Hk = 1

CaseData tinyCase(const std::string& path, int seed, std::optional<int64_t> step, double softcap) {
  CaseData c;
  c.info.path = path;
  c.info.config.step = step;
  c.info.config.layer = step ? std::optional<int64_t>(seed % 2) : std::nullopt;
  c.info.config.dtype = "float32";
  c.info.config.softcap = softcap;
  c.info.dims = {1, kH, 1, kSq, kSk, kD, kD};
  const auto t = [&](std::vector<int64_t> shape, int s) {
    return HostTensor::from_double(DType::f32, shape,
                                   tensorValues(shape[0] * shape[1] * shape[2] * shape[3], s));
  };
  c.tensors["q"] = t({1, kH, kSq, kD}, seed);
  c.tensors["k"] = t({1, 1, kSk, kD}, seed + 1);
  c.tensors["v"] = t({1, 1, kSk, kD}, seed + 2);
  c.tensors["do"] = t({1, kH, kSq, kD}, seed + 3);
  return c;
}

// ||dQ_h|| per head, ||dK||, ||dV|| of the one KV head, from the DESIGN §3 formulas in fp64.
struct Norms {
  double dq[kH] = {}, dk = 0, dv = 0;
  double caseDq() const { return std::hypot(dq[0], dq[1]); }
  double total() const { return std::sqrt(dq[0] * dq[0] + dq[1] * dq[1] + dk * dk + dv * dv); }
};

Norms directNorms(const CaseData& c) {
  const std::vector<double> q = c.tensors.at("q").to_double(), k = c.tensors.at("k").to_double(),
                            v = c.tensors.at("v").to_double(), d_o = c.tensors.at("do").to_double();
  const double scale = 1.0 / std::sqrt(double{kD});
  double dk[kSk][kD] = {}, dv[kSk][kD] = {};
  Norms n;
  for (int64_t h = 0; h < kH; ++h) {
    const double* qh = q.data() + h * kSq * kD;
    const double* doh = d_o.data() + h * kSq * kD;
    double sumDq = 0;
    for (int64_t i = 0; i < kSq; ++i) {
      double s[kSk], p[kSk], m = -INFINITY, l = 0, o[kD] = {}, dp[kSk], dsum = 0;
      for (int64_t j = 0; j < kSk; ++j) {
        s[j] = 0;
        for (int64_t d = 0; d < kD; ++d) s[j] += scale * qh[i * kD + d] * k[j * kD + d];
        m = std::max(m, s[j]);
      }
      for (int64_t j = 0; j < kSk; ++j) l += std::exp(s[j] - m);
      for (int64_t j = 0; j < kSk; ++j) {
        p[j] = std::exp(s[j] - m) / l;
        for (int64_t e = 0; e < kD; ++e) o[e] += p[j] * v[j * kD + e];
      }
      for (int64_t e = 0; e < kD; ++e) dsum += doh[i * kD + e] * o[e];
      for (int64_t j = 0; j < kSk; ++j) {
        dp[j] = 0;
        for (int64_t e = 0; e < kD; ++e) dp[j] += doh[i * kD + e] * v[j * kD + e];
      }
      for (int64_t d = 0; d < kD; ++d) {
        double dq = 0;
        for (int64_t j = 0; j < kSk; ++j) {
          const double ds = p[j] * (dp[j] - dsum);
          dq += scale * ds * k[j * kD + d];
          dk[j][d] += scale * ds * qh[i * kD + d];
          dv[j][d] += p[j] * doh[i * kD + d];
        }
        sumDq += dq * dq;
      }
    }
    n.dq[h] = std::sqrt(sumDq);
  }
  for (int64_t j = 0; j < kSk; ++j) {
    for (int64_t d = 0; d < kD; ++d) {
      n.dk += dk[j][d] * dk[j][d];
      n.dv += dv[j][d] * dv[j][d];
    }
  }
  n.dk = std::sqrt(n.dk);
  n.dv = std::sqrt(n.dv);
  return n;
}

// fp32 kernel against fp64: relative 1e-5 (DESIGN §3's fp32 rule).
bool close(double got, double want) {
  return std::fabs(got - want) <= 1e-5 * std::fabs(want);
}

// /step_00S/layer_0L for S, L in {0, 1}; /step_001/layer_01 gets a [1, 1, 2, 4] mask, which
// does not broadcast to [1, 2, 3, 4]: the reader rejects that group.
bool writeSeriesDump(const QString& path, std::vector<CaseData>* good) {
  Result<DumpWriter> w = DumpWriter::create(path.toStdString());
  if (!w) return false;
  for (int s = 0; s < 2; ++s) {
    for (int l = 0; l < 2; ++l) {
      const std::string group = "/step_00" + std::to_string(s) + "/layer_0" + std::to_string(l);
      const CaseData c = tinyCase(group, 2 * s + l, s, 0);
      if (!w->write_case(group, c)) return false;
      if (s == 1 && l == 1) {
        const HostTensor mask =
            HostTensor::from_double(DType::boolean, {1, 1, 2, 4}, std::vector<double>(8, 1.0));
        if (!w->write_extra_dataset(group, "mask", mask)) return false;
      } else {
        good->push_back(c);
      }
    }
  }
  return static_cast<bool>(w->close());
}

}  // namespace

void ViewGapTest::gradient_norm_metrics_match_direct_computation() {
  QTemporaryDir dir;
  std::vector<CaseData> cases;
  const QString path = dir.filePath(QStringLiteral("series.h5"));
  QVERIFY(writeSeriesDump(path, &cases));
  ShownWindow w;
  QVERIFY(w.window->openTarget({path, QStringLiteral("/step_000/layer_01")}));
  const Norms want = directNorms(cases[1]);
  AnalysisController* analysis = w.window->analysis();
  QVERIFY(waitShown([&] {
    const auto s = analysis->summary();
    return s && s->case_path == "/step_000/layer_01";
  }));
  const HeadMetrics& m = analysis->summary()->metrics;
  for (int64_t h = 0; h < kH; ++h) {
    QVERIFY2(close(m.at(Metric::grad_norm, 0, h), want.dq[h]), qPrintable(QString::number(h)));
    QVERIFY(close(m.at(Metric::dk_norm, 0, h), want.dk));  // both heads read KV head 0
    QVERIFY(close(m.at(Metric::dv_norm, 0, h), want.dv));
    QVERIFY(close(m.at(Metric::grad_total, 0, h),
                  std::sqrt(want.dq[h] * want.dq[h] + want.dk * want.dk + want.dv * want.dv)));
  }
  QVERIFY(close(m.aggregate(Metric::grad_norm), want.caseDq()));
  QVERIFY(close(m.aggregate(Metric::dk_norm), want.dk));  // counted once, not per query head
  QVERIFY(close(m.aggregate(Metric::grad_total), want.total()));
  // The (batch x head) map shows the chosen metric.
  OverviewPanel* overview = w.window->overview();
  overview->setMetric(Metric::dv_norm);
  const MatrixGrid* heads = overview->headMap()->grid();
  QVERIFY(heads != nullptr && heads->rows == 1 && heads->cols == kH);
  QVERIFY(close(heads->value[1], want.dv));
}

void ViewGapTest::series_overview_shows_error_cell_and_other_values() {
  QTemporaryDir dir;
  std::vector<CaseData> cases;
  const QString path = dir.filePath(QStringLiteral("series.h5"));
  QVERIFY(writeSeriesDump(path, &cases));
  ShownWindow w;
  QVERIFY(w.window->openTarget({path, QStringLiteral("/step_000/layer_00")}));
  AnalysisController* analysis = w.window->analysis();
  QVERIFY(waitShown([&] {
    const auto s = analysis->series();
    return s && s->done == 4 && !analysis->seriesRunner()->busy();
  }));
  OverviewPanel* overview = w.window->overview();
  overview->setMetric(Metric::grad_total);
  const MatrixGrid* g = overview->seriesMap()->grid();
  QVERIFY(g != nullptr && g->rows == 2 && g->cols == 2);
  for (int cell = 0; cell < 3; ++cell) {  // steps x layers, row-major: (0,0) (0,1) (1,0)
    QCOMPARE(g->cls[static_cast<size_t>(cell)], CellClass::finite);
    QVERIFY2(close(g->value[static_cast<size_t>(cell)], directNorms(cases[cell]).total()),
             qPrintable(QString::number(cell)));
  }
  QCOMPARE(g->cls[3], CellClass::masked);  // not a NaN of the metric
  QCOMPARE(g->counts.nan, 0);
  const QString error = overview->seriesError(1, 1);
  QVERIFY2(error.contains(QStringLiteral("/step_001/layer_01/mask")) &&
               error.contains(QStringLiteral("not broadcastable")),
           qPrintable(error));
  QVERIFY(overview->seriesError(0, 1).isEmpty());
  const QList<Annotation> marks = AnnotationLayer::of(overview->seriesMap())->annotations();
  QCOMPARE(marks.size(), 1);
  QCOMPARE(marks[0].text, QStringLiteral("error"));
  QCOMPARE(marks[0].from, QPointF(1 - 0.45, 1 - 0.45));
  overview->seriesMap()->hoverCell(1, 1);
  QCOMPARE(overview->seriesMap()->toolTip(), error);
  QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
}

void ViewGapTest::unsupported_backend_is_greyed_with_reason() {
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("softcap.h5"));
  {
    Result<DumpWriter> writer = DumpWriter::create(path.toStdString());
    QVERIFY(static_cast<bool>(writer));
    QVERIFY(static_cast<bool>(writer->write_case("/capped", tinyCase("/capped", 0, {}, 30.0))));
    QVERIFY(static_cast<bool>(writer->close()));
  }
  ShownWindow w;
  QVERIFY(w.window->openTarget({path, QStringLiteral("/capped")}));
  QComboBox* box = w.window->controls()->backendBox();
  auto* model = qobject_cast<QStandardItemModel*>(box->model());
  QVERIFY(model != nullptr);
  const int flash = box->findData(QStringLiteral("torch-flash-cpu"));
  const int fused = box->findData(QStringLiteral("cpu-fused"));
  QVERIFY(flash > 0 && fused > 0);
  QVERIFY(!model->item(flash)->isEnabled());
  QVERIFY2(box->itemData(flash, Qt::ToolTipRole).toString().contains(QStringLiteral("softcap")),
           qPrintable(box->itemData(flash, Qt::ToolTipRole).toString()));
  QVERIFY(model->item(fused)->isEnabled());
  QVERIFY(model->item(box->findData(QStringLiteral("reference")))->isEnabled());
  // The same backend can run an uncapped case.
  const QString plain = dir.filePath(QStringLiteral("plain.h5"));
  {
    Result<DumpWriter> writer = DumpWriter::create(plain.toStdString());
    QVERIFY(static_cast<bool>(writer));
    QVERIFY(static_cast<bool>(writer->write_case("/plain", tinyCase("/plain", 0, {}, 0))));
    QVERIFY(static_cast<bool>(writer->close()));
  }
  QVERIFY(w.window->openTarget({plain, QStringLiteral("/plain")}));
  QVERIFY(model->item(flash)->isEnabled());
  QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
}

}  // namespace attnscope::test
