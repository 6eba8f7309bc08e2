// View state in the sidecar session: capture before saves, restore on first show (see
// ViewStateController.h).
#include "app/gui/ViewStateController.h"

#include <QJsonArray>
#include <QStandardPaths>
#include <QTimer>
#include <cmath>

#include "app/export/SessionFile.h"
#include "app/export/SettingNames.h"
#include "app/gui/AnnotationController.h"
#include "app/gui/SessionContext.h"
#include "core/kernel_registry.h"

namespace attnscope {
namespace {

constexpr int kSaveDelayMs = 500;  // view-state changes within this are saved once
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

QJsonObject settingsJson(const RunChoice& s) {
  // Absent mode / mask fill replay the recording.
  QJsonObject json;
  if (s.mode()) json[QStringLiteral("mode")] = modeName(*s.mode());
  if (s.mask_fill) json[QStringLiteral("mask_fill")] = maskFillName(*s.mask_fill);
  if (s.precision) {
    json[QStringLiteral("precision")] = QString::fromLatin1(precision_name(*s.precision));
  }
  if (s.scale) json[QStringLiteral("scale")] = *s.scale;
  if (s.clip_norm) {
    json[QStringLiteral("clip_norm")] = *s.clip_norm;
    json[QStringLiteral("clip_scope")] = QLatin1String(clip_scope_name(s.clip_scope));
  }
  if (!s.backend.empty()) json[QStringLiteral("backend")] = QString::fromStdString(s.backend);
  return json;
}

}  // namespace

ViewStateController::ViewStateController(SessionContext* context, AnnotationController* annotations,
                                         QObject* parent)
    : QObject(parent), context_(context), annotations_(annotations) {
  connect(context_, &SessionContext::caseChanged, this, &ViewStateController::onCaseChanged);
  connect(context_, &SessionContext::headChanged, this, &ViewStateController::onStateChanged);
  connect(context_, &SessionContext::settingsChanged, this, &ViewStateController::onStateChanged);
  connect(context_, &SessionContext::shownViewChanged, this, [this](HeadView shown) {
    if (!restoring_) restoreZoom(shown);
    onStateChanged();
  });
  connect(context_, &SessionContext::zoomed, this, &ViewStateController::onZoomed);
  connect(context_, &SessionContext::coloursChanged, this, &ViewStateController::onStateChanged);
  connect(annotations_, &AnnotationController::aboutToSave, this, &ViewStateController::capture);
  // Qt's test mode (set by the test suites that open the bundled sample) keeps the sample's
  // folder free of view-state sidecars.
  autosave_ = !QStandardPaths::isTestModeEnabled() &&
              qEnvironmentVariable("ATTNSCOPE_SESSION_AUTOSAVE") != QStringLiteral("0");
  saveTimer_ = new QTimer(this);
  saveTimer_->setSingleShot(true);
  saveTimer_->setInterval(kSaveDelayMs);
  connect(saveTimer_, &QTimer::timeout, this, &ViewStateController::flush);
}

QString ViewStateController::lastCase(const QString& dump, const QStringList& cases) {
  const QString last = SessionFile::load(dump, false).lastCase;
  return cases.contains(last) ? last : QString();
}

void ViewStateController::saveNow() {
  saveTimer_->stop();
  flush();
}

void ViewStateController::flush() {
  const SessionFile* s = annotations_->session();
  if (s != nullptr && !context_->casePath().isEmpty() && (autosave_ || s->exists())) {
    annotations_->saveSession();
  }
}

void ViewStateController::onZoomed(HeadView view, const std::optional<MatrixWindow>& window) {
  if (window) {
    zooms_[view] = *window;
  } else {
    zooms_.erase(view);
  }
  onStateChanged();
}

void ViewStateController::onStateChanged() {
  if (restoring_) return;
  const SessionFile* s = annotations_->session();
  if (s != nullptr && s->exists()) {
    saveTimer_->stop();
    annotations_->saveSession();
  } else {
    saveTimer_->start();
  }
}

void ViewStateController::onCaseChanged() {
  SessionFile* s = annotations_->currentSession();
  if (s == nullptr) return;
  restoring_ = true;
  // What-ifs belong to their dump (a run folder's ranks share them): another dump starts from
  // its recorded run, or from what its session keeps.
  const OpenDump& file = context_->file(context_->fileIndex());
  const QString owner = file.run.folder.isEmpty() ? s->dump() : file.run.folder;
  if (owner != shownDump_) {
    // What-ifs chosen while another dump was shown do not carry over (those chosen before the
    // first dump opened apply to it).
    if (!shownDump_.isEmpty()) context_->resetToRecorded();
    shownDump_ = owner;
    context_->setWhatIfsKept(false);
    if (!s->settings.isEmpty()) {
      restoreSettings(s->settings);
      // What-ifs in the sidecar were kept by the user: they stay kept.
      context_->setWhatIfsKept(!context_->whatIfs().isEmpty());
    }
  }
  const QString casePath = context_->casePath();
  const QString key = s->dump() + QLatin1Char('|') + casePath;
  pendingZooms_.clear();
  zooms_.clear();
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
  const QString mode = json.value(QStringLiteral("mode")).toString();
  std::optional<Mode> m;
  for (Mode candidate : {Mode::fused, Mode::unfused}) {
    if (mode == modeName(candidate)) m = candidate;
  }
  context_->setMode(m);
  const QString fill = json.value(QStringLiteral("mask_fill")).toString();
  std::optional<MaskFill> f;
  for (MaskFill c : {MaskFill::neg_inf, MaskFill::neg_1e9, MaskFill::finfo_min, MaskFill::safe}) {
    if (fill == maskFillName(c)) f = c;
  }
  context_->setMaskFill(f);
  context_->setScale(positiveNumber(json.value(QStringLiteral("scale"))));
  context_->setClipNorm(positiveNumber(json.value(QStringLiteral("clip_norm"))));
  context_->setClipScope(
      clip_scope_named(json.value(QStringLiteral("clip_scope")).toString().toStdString())
          .value_or(ClipScope::whole_case));
  // A backend this build does not have (e.g. a GPU variant) falls back to the CPU kernels.
  const std::string backend = json.value(QStringLiteral("backend")).toString().toStdString();
  context_->setBackend(find_variant(backend) != nullptr ? backend : std::string());
}

void ViewStateController::restoreCase(const CaseSession& saved) {
  const CaseInfo* info = context_->caseInfo();
  if (info == nullptr) return;
  if (saved.batch >= 0 && saved.batch < info->dims.batch) context_->setBatch(saved.batch);
  if (saved.head >= 0 && saved.head < info->dims.heads) context_->setHead(saved.head);
  if (const auto shown = head_view_named(saved.view.toStdString())) context_->showView(*shown);
  restoreViews(saved.views);
  for (auto it = saved.zooms.begin(); it != saved.zooms.end(); ++it) {
    const std::optional<HeadView> v = head_view_named(it.key().toStdString());
    if (!v) continue;
    const auto [rows, cols] = head_view_shape(*v, info->dims);
    if (it->row_end <= rows && it->col_end <= cols) pendingZooms_[*v] = *it;
  }
  restoreZoom(context_->shownView());
}

// The score tabs share one computed window, so a tab's zoom is applied when it is shown.
void ViewStateController::restoreZoom(HeadView view) {
  const auto it = pendingZooms_.find(view);
  if (it == pendingZooms_.end()) return;
  const MatrixWindow window = it->second;
  pendingZooms_.erase(it);
  zooms_[view] = window;
  context_->showRegion(
      RegionRequest{view, context_->batch(), context_->head(), window, {}, false, false});
}

void ViewStateController::restoreViews(const QJsonObject& views) {
  for (HeadView v : kHeadViews) {
    const QJsonObject state = views.value(QLatin1String(head_view_name(v))).toObject();
    HeatmapColours c;  // nothing saved: the defaults
    const QString map = state.value(kColormap).toString();
    for (ColormapKind k : {ColormapKind::sequential, ColormapKind::diverging}) {
      if (map == colormapKey(k)) c.colormap = k;
    }
    for (ScaleKind k : {ScaleKind::log, ScaleKind::symlog}) {
      if (state.value(kScale).toString() == scaleName(k)) c.scale = k;
    }
    const QJsonArray range = state.value(kRange).toArray();
    const double lo = range.at(0).toDouble(NAN), hi = range.at(1).toDouble(NAN);
    if (range.size() == 2 && std::isfinite(lo) && std::isfinite(hi) && hi > lo) {
      c.range = std::make_pair(lo, hi);
    }
    context_->setColours(v, c);
  }
}

QJsonObject ViewStateController::captureViews() const {
  QJsonObject views;
  for (HeadView v : kHeadViews) {
    const HeatmapColours& c = context_->colours(v);
    if (c == HeatmapColours{}) continue;  // the default state is not written
    QJsonObject state{{kScale, scaleName(c.scale)}};
    if (c.colormap) state[kColormap] = colormapKey(*c.colormap);
    if (c.range) state[kRange] = QJsonArray{c.range->first, c.range->second};
    views[QLatin1String(head_view_name(v))] = state;
  }
  return views;
}

void ViewStateController::capture(SessionFile* s) {
  if (context_->casePath().isEmpty() || s->dump() != context_->file(context_->fileIndex()).path) {
    return;
  }
  s->lastCase = context_->casePath();
  // What-ifs go into the sidecar only when the user keeps them (the what-if banner); choices
  // that agree with the recorded run (a mode when the dump does not name its backend) always.
  s->settings =
      settingsJson(context_->whatIfsKept() ? context_->choice() : context_->choiceWithoutWhatIfs());
  CaseSession& c = s->cases[context_->casePath()];
  c.batch = context_->batch();
  c.head = context_->head();
  c.view = QString::fromLatin1(head_view_name(context_->shownView()));
  c.views = captureViews();
  // Tabs whose saved zoom is not shown yet keep it.
  c.zooms.clear();
  for (const auto* zooms : {&zooms_, &pendingZooms_}) {
    for (const auto& [v, window] : *zooms) c.zooms[QString::fromLatin1(head_view_name(v))] = window;
  }
}

}  // namespace attnscope
