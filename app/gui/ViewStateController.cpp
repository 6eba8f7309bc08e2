// View state in the sidecar session: capture before saves, restore on first show (see
// ViewStateController.h).
#include "app/gui/ViewStateController.h"

#include <QJsonArray>
#include <QTabWidget>
#include <cmath>

#include "app/gui/AnnotationController.h"
#include "app/gui/NavigationController.h"
#include "app/gui/SessionContext.h"
#include "app/gui/SessionFile.h"
#include "app/panels/HeatmapPanel.h"
#include "app/plot/HeatmapView.h"
#include "core/kernel_registry.h"

namespace attnscope {
namespace {

const QString kColormap = QStringLiteral("colormap");
const QString kScale = QStringLiteral("scale");
const QString kRange = QStringLiteral("range");

QString colormapKey(ColormapKind kind) {
  return kind == ColormapKind::sequential ? QStringLiteral("sequential")
                                          : QStringLiteral("diverging");
}

std::optional<double> positiveNumber(const QJsonValue& value) {
  const double x = value.toDouble(-1);
  return std::isfinite(x) && x > 0 ? std::optional<double>(x) : std::nullopt;
}

QJsonObject settingsJson(const ComputeSettings& s) {
  QJsonObject json{{QStringLiteral("mode"), modeName(s.mode)},
                   {QStringLiteral("mask_fill"), maskFillName(s.maskFill)}};
  if (s.precision) {
    json[QStringLiteral("precision")] = QString::fromLatin1(precision_name(*s.precision));
  }
  if (s.scale) json[QStringLiteral("scale")] = *s.scale;
  if (s.clipNorm) json[QStringLiteral("clip_norm")] = *s.clipNorm;
  if (!s.backend.empty()) json[QStringLiteral("backend")] = QString::fromStdString(s.backend);
  return json;
}

}  // namespace

ViewStateController::ViewStateController(SessionContext* context, HeatmapPanel* heatmaps,
                                         AnnotationController* annotations,
                                         NavigationController* navigation, QObject* parent)
    : QObject(parent),
      context_(context),
      heatmaps_(heatmaps),
      annotations_(annotations),
      navigation_(navigation) {
  for (const auto& [name, widget] : annotations_->views()) {
    defaultMaps_[name] = static_cast<HeatmapView*>(widget)->colorScale().map;
  }
  connect(context_, &SessionContext::caseChanged, this, &ViewStateController::onCaseChanged);
  connect(context_, &SessionContext::headChanged, this, &ViewStateController::onStateChanged);
  connect(context_, &SessionContext::settingsChanged, this, &ViewStateController::onStateChanged);
  connect(heatmaps_->tabs(), &QTabWidget::currentChanged, this,
          &ViewStateController::onStateChanged);
  connect(annotations_, &AnnotationController::aboutToSave, this, &ViewStateController::capture);
}

QString ViewStateController::lastCase(const QString& dump, const QStringList& cases) {
  const QString last = SessionFile::load(dump, false).lastCase;
  return cases.contains(last) ? last : QString();
}

void ViewStateController::saveNow() {
  const SessionFile* s = annotations_->session();
  if (s != nullptr && s->exists()) annotations_->saveSession();
}

void ViewStateController::onStateChanged() {
  if (restoring_) return;
  const SessionFile* s = annotations_->session();
  if (s != nullptr && s->exists()) annotations_->saveSession();
}

void ViewStateController::onCaseChanged() {
  SessionFile* s = annotations_->currentSession();
  if (s == nullptr) return;
  restoring_ = true;
  if (!restoredDumps_.contains(s->dump())) {
    restoredDumps_.insert(s->dump());
    if (!s->settings.isEmpty()) restoreSettings(s->settings);
  }
  const QString casePath = context_->casePath();
  const QString key = s->dump() + QLatin1Char('|') + casePath;
  if (!restoredCases_.contains(key) && s->cases.contains(casePath)) {
    restoredCases_.insert(key);
    restoreCase(s->cases[casePath]);
  }
  restoring_ = false;
  onStateChanged();  // remembers the new last case
}

void ViewStateController::restoreSettings(const QJsonObject& json) {
  const QString precision = json.value(QStringLiteral("precision")).toString();
  std::optional<Precision> p;
  for (Precision candidate : {Precision::f32, Precision::f16, Precision::bf16}) {
    if (precision == QLatin1String(precision_name(candidate))) p = candidate;
  }
  context_->setPrecision(p);
  context_->setMode(json.value(QStringLiteral("mode")).toString() == modeName(Mode::unfused)
                        ? Mode::unfused
                        : Mode::fused);
  const QString fill = json.value(QStringLiteral("mask_fill")).toString();
  for (MaskFill f : {MaskFill::neg_inf, MaskFill::neg_1e9, MaskFill::finfo_min, MaskFill::safe}) {
    if (fill == maskFillName(f)) context_->setMaskFill(f);
  }
  context_->setScale(positiveNumber(json.value(QStringLiteral("scale"))));
  context_->setClipNorm(positiveNumber(json.value(QStringLiteral("clip_norm"))));
  // A backend this build does not have (e.g. a GPU variant) falls back to the CPU kernels.
  const std::string backend = json.value(QStringLiteral("backend")).toString().toStdString();
  context_->setBackend(find_variant(backend) != nullptr ? backend : std::string());
}

void ViewStateController::restoreCase(const CaseSession& saved) {
  const CaseInfo* info = context_->caseInfo();
  if (info == nullptr) return;
  if (saved.batch >= 0 && saved.batch < info->dims.batch) context_->setBatch(saved.batch);
  if (saved.head >= 0 && saved.head < info->dims.heads) context_->setHead(saved.head);
  if (!saved.view.isEmpty()) heatmaps_->showMatrix(saved.view);
  restoreViews(saved.views);
  const auto [rows, cols] = viewShape(saved.view, info->dims);
  if (saved.zoom && saved.zoom->row_end <= rows && saved.zoom->col_end <= cols) {
    navigation_->showRegion(saved.view, context_->batch(), context_->head(), *saved.zoom);
  }
}

void ViewStateController::restoreViews(const QJsonObject& views) {
  for (const auto& [name, widget] : annotations_->views()) {
    auto* view = static_cast<HeatmapView*>(widget);
    const QJsonObject state = views.value(name).toObject();
    view->setColormap(state.value(kColormap).toString() == colormapKey(ColormapKind::diverging)
                          ? ColormapKind::diverging
                      : state.value(kColormap).toString() == colormapKey(ColormapKind::sequential)
                          ? ColormapKind::sequential
                          : defaultMaps_[name]);
    ScaleKind scale = ScaleKind::linear;
    for (ScaleKind k : {ScaleKind::log, ScaleKind::symlog}) {
      if (state.value(kScale).toString() == scaleName(k)) scale = k;
    }
    view->setScaleKind(scale);  // back to an automatic range
    const QJsonArray range = state.value(kRange).toArray();
    const double lo = range.at(0).toDouble(NAN), hi = range.at(1).toDouble(NAN);
    if (range.size() == 2 && std::isfinite(lo) && std::isfinite(hi) && hi > lo) {
      view->setColorRange(lo, hi);
    }
  }
}

QJsonObject ViewStateController::captureViews() const {
  QJsonObject views;
  for (const auto& [name, widget] : annotations_->views()) {
    const auto* view = static_cast<const HeatmapView*>(widget);
    const ColorScale& cs = view->colorScale();
    const bool automatic = view->automaticRange();
    const auto it = defaultMaps_.find(name);
    if (automatic && cs.scale == ScaleKind::linear && it != defaultMaps_.end() &&
        it->second == cs.map) {
      continue;  // the default state is not written
    }
    QJsonObject state{{kColormap, colormapKey(cs.map)}, {kScale, scaleName(cs.scale)}};
    if (!automatic) state[kRange] = QJsonArray{cs.lo, cs.hi};
    views[name] = state;
  }
  return views;
}

void ViewStateController::capture(SessionFile* s) {
  if (context_->casePath().isEmpty() || s->dump() != context_->file(context_->fileIndex()).path) {
    return;
  }
  s->lastCase = context_->casePath();
  s->settings = settingsJson(context_->settings());
  CaseSession& c = s->cases[context_->casePath()];
  c.batch = context_->batch();
  c.head = context_->head();
  HeatmapView* view = heatmaps_->currentView();
  c.view = view->name();
  c.views = captureViews();
  // A zoom still waiting for its result keeps the saved one; a whole-matrix view has none.
  const MatrixGrid* g = view->grid();
  if (!navigation_->pending() && g != nullptr) {
    const ViewWindow w = view->visibleWindow();
    const bool whole = w == ViewWindow{0, g->total_rows, 0, g->total_cols};
    c.zoom = whole ? std::nullopt : std::optional<ViewWindow>(w);
  }
}

}  // namespace attnscope
