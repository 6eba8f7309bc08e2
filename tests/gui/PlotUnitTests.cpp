// Units under the GUI: colormaps and value scales, command-line parsing.
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <limits>

#include "app/gui/AppOptions.h"
#include "app/plot/Colormaps.h"
#include "tests/gui/GuiTest.h"

namespace attnscope::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Colour distance in RGB units.
int distance(const QColor& a, const QColor& b) {
  return std::abs(a.red() - b.red()) + std::abs(a.green() - b.green()) +
         std::abs(a.blue() - b.blue());
}

}  // namespace

void GuiTest::colormap_ends_map_to_end_stops() {
  for (ColormapKind kind : {ColormapKind::sequential, ColormapKind::diverging}) {
    const auto& stops = colormapStops(kind);
    QVERIFY(stops.size() >= 9);
    ColorScale scale;
    scale.map = kind;
    scale.lo = -3;
    scale.hi = 5;
    QCOMPARE(scale.colorFor(-3), stops.front().second);
    QCOMPARE(scale.colorFor(5), stops.back().second);
    QCOMPARE(scale.colorFor(-100), stops.front().second);  // clamped below the range
    QCOMPARE(scale.colorFor(100), stops.back().second);
    QCOMPARE(colormapColor(kind, 0.0), stops.front().second);
    QCOMPARE(colormapColor(kind, 1.0), stops.back().second);
  }
  // Diverging: 0 of a symmetric range sits on the middle (near-white) stop.
  ColorScale div{ColormapKind::diverging, ScaleKind::linear, -2, 2};
  QCOMPARE(div.colorFor(0), colormapStops(ColormapKind::diverging)[5].second);
}

void GuiTest::colormap_never_paints_nonfinite() {
  const CellClass overlays[] = {CellClass::nan, CellClass::pos_inf, CellClass::neg_inf,
                                CellClass::masked};
  for (ColormapKind kind : {ColormapKind::sequential, ColormapKind::diverging}) {
    const ColorScale scale{kind, ScaleKind::linear, 0, 1};
    QCOMPARE(scale.colorFor(kNaN), overlayColor(CellClass::nan));
    QCOMPARE(scale.colorFor(kInf), overlayColor(CellClass::pos_inf));
    QCOMPARE(scale.colorFor(-kInf), overlayColor(CellClass::neg_inf));
    QVERIFY(std::isnan(scale.position(kNaN)));
    // No overlay colour is (nearly) a colormap colour.
    for (int i = 0; i <= 256; ++i) {
      const QColor c = colormapColor(kind, i / 256.0);
      for (CellClass cls : overlays)
        QVERIFY2(distance(c, overlayColor(cls)) > 60, qPrintable(c.name()));
    }
  }
  // The four overlay colours are distinct from one another.
  for (CellClass a : overlays) {
    for (CellClass b : overlays) {
      if (a != b) QVERIFY(distance(overlayColor(a), overlayColor(b)) > 150);
    }
  }
  QVERIFY(!overlayColor(CellClass::finite).isValid());
}

void GuiTest::log_and_symlog_scales_invert() {
  for (double v : {1e-6, 0.5, 3.0, 65504.0}) {
    QVERIFY(std::fabs(fromDisplay(ScaleKind::log, toDisplay(ScaleKind::log, v)) / v - 1) < 1e-12);
    for (double s : {v, -v}) {
      const double back = fromDisplay(ScaleKind::symlog, toDisplay(ScaleKind::symlog, s, 0.1), 0.1);
      QVERIFY(std::fabs(back - s) <= 1e-9 * std::fabs(s));
    }
  }
  QCOMPARE(toDisplay(ScaleKind::symlog, 0.0), 0.0);
  QVERIFY(std::isinf(toDisplay(ScaleKind::log, 0.0)));
  const auto [lo, hi] =
      autoRange(ColormapKind::sequential, ScaleKind::log, {0.f, -4.f, 0.01f, 7.f});
  QCOMPARE(lo, double{0.01f});
  QCOMPARE(hi, 7.0);
  const auto [dlo, dhi] = autoRange(ColormapKind::diverging, ScaleKind::linear, {-1.f, 3.f, kNaN});
  QCOMPARE(dlo, -3.0);
  QCOMPARE(dhi, 3.0);
}

void GuiTest::auto_range_ignores_rare_extremes_and_picks_the_map() {
  // P-like: 10000 values in [0, 0.3] and one P = 1 cell: the range ends near 0.3, not at 1.
  std::vector<float> p(10000);
  for (size_t i = 0; i < p.size(); ++i) p[i] = 0.3f * static_cast<float>(i) / 9999.0f;
  p.push_back(1.0f);
  const auto [plo, phi] = autoRange(ColormapKind::sequential, ScaleKind::linear, p);
  QVERIFY2(plo >= 0 && plo < 0.001 && phi > 0.29 && phi < 0.3, qPrintable(QString::number(phi)));
  QCOMPARE(colormapFor(p), ColormapKind::sequential);
  // One-signed scores (41..51): a sequential map over their own range, not a red half of a
  // diverging one centred on 0.
  std::vector<float> s(4096);
  for (size_t i = 0; i < s.size(); ++i) s[i] = 41.0f + 10.0f * static_cast<float>(i % 97) / 96.0f;
  QCOMPARE(colormapFor(s), ColormapKind::sequential);
  const auto [slo, shi] = autoRange(colormapFor(s), ScaleKind::linear, s);
  QVERIFY(slo >= 41 && slo < 41.2 && shi > 50.8 && shi <= 51);
  // The ends are exactly the 0.1 % order statistics of the finite values: 5003 values (one
  // descending run, many ties, NaN and inf between them) leave out 5 at each end.
  std::vector<float> ranked;
  for (int i = 5002; i >= 0; --i) ranked.push_back(static_cast<float>((i * 7919) % 1013) - 500.f);
  ranked.insert(ranked.begin() + 17, kNaN);
  ranked.insert(ranked.begin() + 4000, std::numeric_limits<float>::infinity());
  std::vector<float> sorted(ranked.begin(), ranked.end());
  sorted.erase(
      std::remove_if(sorted.begin(), sorted.end(), [](float v) { return !std::isfinite(v); }),
      sorted.end());
  std::sort(sorted.begin(), sorted.end());
  QCOMPARE(sorted.size(), size_t{5003});
  const auto [rlo, rhi] = autoRange(ColormapKind::sequential, ScaleKind::linear, ranked);
  QCOMPARE(rlo, double{sorted[5]});
  QCOMPARE(rhi, double{sorted[5003 - 1 - 5]});
  QVERIFY(rlo > sorted.front() && rhi < sorted.back());
  // 3000 NaN cells more: the cut follows the finite values alone.
  ranked.insert(ranked.begin() + 2500, 3000, kNaN);
  QCOMPARE(autoRange(ColormapKind::sequential, ScaleKind::linear, ranked),
           std::make_pair(double{sorted[5]}, double{sorted[5003 - 1 - 5]}));
  // Both signs: diverging, symmetric around 0; non-finite values play no part.
  const std::vector<float> mixed{-2.f, 0.5f, 1.f, kNaN, std::numeric_limits<float>::infinity()};
  QCOMPARE(colormapFor(mixed), ColormapKind::diverging);
  QCOMPARE(colormapFor({kNaN, 0.f}), ColormapKind::sequential);
  // What the range leaves to the end colours: finite values outside it (the legend's count).
  ColorScale linear;
  linear.lo = 0;
  linear.hi = 0.5;
  QCOMPARE(countBeyondRange(linear, p), int64_t{1});  // the P = 1 cell
  ColorScale log;
  log.scale = ScaleKind::log;
  log.lo = 1e-3;
  QCOMPARE(countBeyondRange(log, {0.f, 1e-5f, 1e-2f, -10.f, kNaN, kInf}), int64_t{2});
}

void GuiTest::open_target_splits_file_and_case() {
  OpenTarget t = parseOpenTarget(QStringLiteral("/data/run.h5::/step_3/layer_1"));
  QCOMPARE(t.file, QStringLiteral("/data/run.h5"));
  QCOMPARE(t.casePath, QStringLiteral("/step_3/layer_1"));
  t = parseOpenTarget(QStringLiteral("run.h5::fp16_score_overflow"));
  QCOMPARE(t.casePath, QStringLiteral("/fp16_score_overflow"));
  t = parseOpenTarget(samplePath());
  QCOMPARE(t.file, samplePath());
  QVERIFY(t.casePath.isEmpty());
}

void GuiTest::command_line_rejects_bad_values() {
  const QString app = QStringLiteral("attnscope");
  AppOptions o = parseCommandLine({app, "--precision", "fp16", "--mode", "unfused", "--head", "3",
                                   "--matrix", "P", "a.h5::/x"});
  QVERIFY2(o.error.isEmpty(), qPrintable(o.error));
  QCOMPARE(o.precision, std::optional(Precision::f16));
  QCOMPARE(o.mode, std::optional(Mode::unfused));
  QCOMPARE(o.head, 3);
  QVERIFY(o.matrix == HeadView::p);
  QCOMPARE(o.targets.size(), 1);
  QVERIFY(!parseCommandLine({app, "--precision", "fp8"}).error.isEmpty());
  QVERIFY(!parseCommandLine({app, "--mode", "flash"}).error.isEmpty());
  QVERIFY(!parseCommandLine({app, "--head", "-1"}).error.isEmpty());
  QVERIFY(!parseCommandLine({app, "--scale", "0"}).error.isEmpty());
  QVERIFY(!parseCommandLine({app, "--matrix", "Z"}).error.isEmpty());
  QVERIFY(!parseCommandLine({app, "--no-such-option"}).error.isEmpty());
}

}  // namespace attnscope::test
