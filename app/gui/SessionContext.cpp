// Shared selection / settings / result state of the GUI (see SessionContext.h).
#include "app/gui/SessionContext.h"

#include <QFileInfo>
#include <QSettings>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "app/export/SettingNames.h"
#include "core/io/dump_probe.h"
#include "core/replay.h"
#include "core/view/head_view.h"

namespace attnscope {
namespace {

constexpr int kMaxRecent = 10;
// Score matrices up to this many entries always get the fp64 reference errors.
constexpr int64_t kAlwaysReference = int64_t{512} * 512;
const char* const kRecentKey = "recentFiles";

}  // namespace

SessionContext::SessionContext(QObject* parent)
    : QObject(parent), annotations_(new AnnotationBoard(this)) {}

int SessionContext::indexOfFile(const QString& path) const {
  const QString canonical = QFileInfo(path).absoluteFilePath();
  for (size_t i = 0; i < files_.size(); ++i) {
    if (files_[i].path == canonical) return static_cast<int>(i);
  }
  return -1;
}

std::vector<int> SessionContext::runFiles(int index) const {
  const QString& folder = file(index).run.folder;
  if (folder.isEmpty()) return {index};
  std::vector<int> out;
  for (int i = 0; i < fileCount(); ++i) {
    if (file(i).run.folder == folder) out.push_back(i);
  }
  std::stable_sort(out.begin(), out.end(),
                   [this](int a, int b) { return file(a).run.rank < file(b).run.rank; });
  return out;
}

int SessionContext::openFile(const QString& path) {
  const int existing = indexOfFile(path);
  if (existing >= 0) return existing;
  // A hostile file that crashes HDF5 itself is opened first in the attnscope-probe process.
  Result<DumpReader> reader = open_untrusted_dump(QFile::encodeName(path).toStdString());
  if (!reader) {
    const Error& e = reader.error();
    emit errorRaised(tr("Cannot open %1").arg(QFileInfo(path).fileName()),
                     QString::fromStdString(e.message), QString::fromStdString(e.hint));
    return -1;
  }
  return adoptFile(path, std::make_shared<const DumpReader>(std::move(reader).value()));
}

int SessionContext::adoptFile(const QString& path, std::shared_ptr<const DumpReader> reader,
                              const RunMember& run) {
  const int existing = indexOfFile(path);
  if (existing >= 0) return existing;
  auto cases = std::make_shared<CaseCache>(reader);
  files_.push_back({QFileInfo(path).absoluteFilePath(), std::move(reader), std::move(cases),
                    std::make_shared<SummaryStore>(), run});
  rememberRecent(run.folder.isEmpty() ? files_.back().path : run.folder);
  emit filesChanged();
  return static_cast<int>(files_.size()) - 1;
}

void SessionContext::refreshFile(int index, std::shared_ptr<const DumpReader> reader) {
  if (index < 0 || index >= fileCount()) return;
  OpenDump& file = files_[static_cast<size_t>(index)];
  std::set<std::string> known;
  for (const CaseInfo& c : file.reader->cases()) known.insert(c.path);
  QStringList added;
  for (const CaseInfo& c : reader->cases()) {
    if (!known.count(c.path)) added << QString::fromStdString(c.path);
  }
  file.cases = std::make_shared<CaseCache>(reader);
  file.reader = std::move(reader);
  emit filesChanged();
  if (!added.isEmpty()) emit casesAdded(file.path, added);
}

QStringList SessionContext::recentFiles() const {
  return QSettings().value(kRecentKey).toStringList();
}

void SessionContext::rememberRecent(const QString& path) {
  QStringList recent = recentFiles();
  recent.removeAll(path);
  recent.prepend(path);
  while (recent.size() > kMaxRecent) recent.removeLast();
  QSettings().setValue(kRecentKey, recent);
}

bool SessionContext::selectCase(int fileIndex, const QString& casePath) {
  if (fileIndex < 0 || fileIndex >= fileCount()) return false;
  const std::string wanted = casePath.toStdString();
  bool found = false;
  for (const CaseInfo& c : files_[static_cast<size_t>(fileIndex)].reader->cases()) {
    found = found || c.path == wanted;
  }
  if (!found) return false;
  if (fileIndex == fileIndex_ && casePath == casePath_) return true;
  fileIndex_ = fileIndex;
  casePath_ = casePath;
  batch_ = 0;
  head_ = 0;
  window_ = MatrixWindow{};
  // A colour range set by hand fits its case's values only: another case starts automatic (its
  // session may restore its own); colormap and scale kind stay.
  for (auto& [view, colours] : colours_) {
    if (!colours.range) continue;
    colours.range.reset();
    emit coloursChanged(view);
  }
  emit caseChanged();
  emit inputsChanged();
  return true;
}

const CaseInfo* SessionContext::caseInfo() const {
  if (fileIndex_ < 0) return nullptr;
  const std::string wanted = casePath_.toStdString();
  for (const CaseInfo& c : files_[static_cast<size_t>(fileIndex_)].reader->cases()) {
    if (c.path == wanted) return &c;
  }
  return nullptr;
}

std::shared_ptr<const DumpReader> SessionContext::reader() const {
  return fileIndex_ < 0 ? nullptr : files_[static_cast<size_t>(fileIndex_)].reader;
}

std::shared_ptr<CaseCache> SessionContext::cases() const {
  return fileIndex_ < 0 ? nullptr : files_[static_cast<size_t>(fileIndex_)].cases;
}

QString SessionContext::caseKey() const {
  return fileIndex_ < 0
             ? QString()
             : files_[static_cast<size_t>(fileIndex_)].path + QLatin1Char('|') + casePath_;
}

void SessionContext::setBatch(int64_t batch) {
  const CaseInfo* c = caseInfo();
  if (c == nullptr || batch == batch_ || batch < 0 || batch >= c->dims.batch) return;
  batch_ = batch;
  window_ = MatrixWindow{};
  emit headChanged();
  emit inputsChanged();
}

void SessionContext::setHead(int64_t head) {
  const CaseInfo* c = caseInfo();
  if (c == nullptr || head == head_ || head < 0 || head >= c->dims.heads) return;
  head_ = head;
  window_ = MatrixWindow{};
  emit headChanged();
  emit inputsChanged();
}

void SessionContext::changeChoice(const RunChoice& next) {
  if (next == choice_) return;
  choice_ = next;
  emit settingsChanged();
  emit inputsChanged();
}

void SessionContext::setScale(std::optional<double> scale) {
  RunChoice next = choice_;
  next.scale = scale;
  changeChoice(next);
}

void SessionContext::setPrecision(std::optional<Precision> precision) {
  RunChoice next = choice_;
  next.precision = precision;
  changeChoice(next);
}

void SessionContext::setMode(std::optional<Mode> mode) {
  RunChoice next = choice_;
  next.modes = mode ? std::vector<Mode>{*mode} : std::vector<Mode>{};
  next.upcast = false;
  changeChoice(next);
}

void SessionContext::setMaskFill(std::optional<MaskFill> fill) {
  RunChoice next = choice_;
  next.mask_fill = fill;
  changeChoice(next);
}

void SessionContext::setBackend(const std::string& backend) {
  RunChoice next = choice_;
  next.backend = backend;
  changeChoice(next);
}

void SessionContext::setClipNorm(std::optional<double> maxNorm) {
  RunChoice next = choice_;
  next.clip_norm = maxNorm;
  changeChoice(next);
}

void SessionContext::setClipScope(ClipScope scope) {
  RunChoice next = choice_;
  next.clip_scope = scope;
  changeChoice(next);
}

void SessionContext::setReferenceWanted(bool wanted) {
  if (wanted == referenceWanted_) return;
  referenceWanted_ = wanted;
  if (wanted && result_ && result_->o_err.empty()) emit inputsChanged();
}

void SessionContext::setScoresWanted(const ScoreSet& wanted) {
  if (wanted == scoresWanted_) return;
  scoresWanted_ = wanted;
  if (!result_) return;
  const SharedGrid* grids[] = {&result_->s, &result_->p, &result_->dp, &result_->ds};
  for (int k = 0; k < 4; ++k) {
    if (wanted[k] && (*grids[k])->empty()) {
      emit inputsChanged();
      return;
    }
  }
}

CaseConfig SessionContext::judgedConfig(const CaseInfo& c) const {
  CaseConfig config = c.config;
  if (const std::shared_ptr<CaseCache> cache = cases()) {
    apply_inferred_run(config, cache->inferred(c.path));
  }
  return config;
}

void SessionContext::runInferred() {
  emit settingsChanged();
  emit inputsChanged();
}

double SessionContext::defaultScale() const {
  const CaseInfo* c = caseInfo();
  return c ? judgedConfig(*c).effective_scale(c->dims.head_dim) : 1.0;
}

double SessionContext::effectiveScale() const {
  return choice_.scale ? *choice_.scale : defaultScale();
}

std::optional<Replay> SessionContext::replay() const {
  const CaseInfo* c = caseInfo();
  if (c == nullptr) return std::nullopt;
  return replay_of(judgedConfig(*c), c->has("dropout_mask"));
}

std::optional<ResolvedRun> SessionContext::resolved() const {
  const std::optional<Replay> r = replay();
  if (!r) return std::nullopt;
  return resolve(choice_, *r, defaultScale());
}

QStringList SessionContext::whatIfs() const {
  QStringList out;
  if (const std::optional<ResolvedRun> r = resolved()) {
    for (const WhatIf& w : r->what_ifs) out << QString::fromStdString(w.text);
  }
  return out;
}

RunChoice SessionContext::choiceWithoutWhatIfs() const {
  const std::optional<Replay> r = replay();
  return r ? without_what_ifs(choice_, *r, defaultScale()) : choice_;
}

void SessionContext::resetToRecorded() {
  changeChoice(RunChoice{});
}

void SessionContext::setWhatIfsKept(bool kept) {
  if (kept == whatIfsKept_) return;
  whatIfsKept_ = kept;
  emit settingsChanged();
}

Precision SessionContext::effectivePrecision() const {
  if (choice_.precision) return *choice_.precision;
  const std::optional<Replay> r = replay();
  return r ? r->precision : Precision::f32;
}

Mode SessionContext::effectiveMode() const {
  if (const std::optional<Mode> m = choice_.mode()) return *m;
  const std::optional<Replay> r = replay();
  return r ? r->modes.front() : Mode::fused;
}

MaskFill SessionContext::effectiveMaskFill() const {
  if (choice_.mask_fill) return *choice_.mask_fill;
  const std::optional<Replay> r = replay();
  return r ? r->mask_fill : MaskFill::neg_inf;
}

void SessionContext::setScoreView(const MatrixWindow& view, QSize pixels) {
  MatrixWindow w = view;
  const CaseInfo* c = caseInfo();
  if (c && w.row_begin == 0 && w.col_begin == 0 && w.row_end >= c->dims.seqlen_q &&
      w.col_end >= c->dims.seqlen_k) {
    w = MatrixWindow{};
  }
  // Pooling to a few pixels more or less looks the same; re-requesting it would recompute the
  // head after every result whose labels nudge the plot's layout.
  const auto close = [](int a, int b) { return std::abs(a - b) <= std::max(a, b) / 8; };
  if (w == window_ && close(pixels.width(), pixels_.width()) &&
      close(pixels.height(), pixels_.height())) {
    return;
  }
  window_ = w;
  pixels_ = pixels;
  // A result that already holds the whole matrix at full resolution covers every zoom.
  if (result_ && result_->s->complete()) return;
  emit inputsChanged();
}

std::optional<HeadRequest> SessionContext::currentRequest() const {
  const CaseInfo* c = caseInfo();
  if (c == nullptr) return std::nullopt;
  HeadRequest r;
  r.run = choice_;  // one mode, and the recorded run's precision and fill made explicit
  r.run.precision = effectivePrecision();
  r.run.mask_fill = effectiveMaskFill();
  r.run.modes = {effectiveMode()};
  r.reference = referenceWanted_ || c->dims.seqlen_q * c->dims.seqlen_k <= kAlwaysReference;
  r.scores = scoresWanted_;
  r.batch = batch_;
  r.head = head_;
  r.out_rows = std::max(1, pixels_.height());
  r.out_cols = std::max(1, pixels_.width());
  // Small matrices are always computed whole: zooming then needs no recompute.
  const bool fits = c->dims.seqlen_q <= r.out_rows && c->dims.seqlen_k <= r.out_cols;
  r.window = fits ? MatrixWindow{} : window_;
  return r;
}

void SessionContext::setResult(std::shared_ptr<const HeadResult> result) {
  result_ = std::move(result);
  // The inspector reads the new result under the cursor, never the last one's value.
  if (hovered_.valid()) {
    const std::optional<HeadView> view = head_view_named(hovered_.matrix);
    const MatrixGrid* grid = result_ && view ? &result_->grid(*view) : nullptr;
    hovered_ = grid && !grid->empty() ? grid->readout(hovered_.row, hovered_.col) : CellReadout{};
    emit hoverChanged();
  }
  emit resultChanged();
}

void SessionContext::setHovered(const CellReadout& readout) {
  hovered_ = readout;
  emit hoverChanged();
}

void SessionContext::pin(const CellReadout& readout) {
  emit cellPinned(readout);
}

void SessionContext::setStepTile(const StepTile& tile) {
  stepTile_ = tile;
  emit stepChanged();
}

FocusTarget findingFocus(const Finding& f) {
  FocusTarget t;
  t.tensor = QString::fromStdString(f.tensor);
  t.batch = f.batch;
  t.head = f.head >= 0 ? f.head : (f.heads.valid() ? f.heads.first : -1);
  if (f.rows.valid()) t.window.row_begin = f.rows.first, t.window.row_end = f.rows.last + 1;
  if (f.cols.valid()) t.window.col_begin = f.cols.first, t.window.col_end = f.cols.last + 1;
  return t;
}

std::optional<RegionRequest> focusRegion(const FocusTarget& target, const CaseDims& dims) {
  const std::optional<HeadView> view = head_view_of_tensor(target.tensor.toStdString());
  if (!view) return std::nullopt;
  RegionRequest r;
  r.view = *view;
  r.batch = target.batch;
  r.head = target.head;
  r.pinFirstNonfinite = target.pinFirstNonfinite;
  const MatrixWindow& at = target.window;
  if (at.row_end < 0) return r;  // every row: the whole matrix
  const auto [rows, cols] = head_view_shape(*view, dims);
  r.window = MatrixWindow{at.row_begin, at.row_end, 0, cols};
  if (at.col_end >= 0 && is_score_view(*view)) {
    r.window.col_begin = at.col_begin;
    r.window.col_end = at.col_end;
  }
  // Some context around a small range, so that the block is seen next to its neighbours.
  const int64_t pad = std::max<int64_t>(4, (r.window.row_end - r.window.row_begin) / 4);
  r.window.row_begin = std::max<int64_t>(0, r.window.row_begin - pad);
  r.window.row_end = std::min(rows, r.window.row_end + pad);
  return r;
}

void SessionContext::focus(const FocusTarget& target) {
  if (target.batch >= 0) setBatch(target.batch);
  if (target.head >= 0) setHead(target.head);
  const CaseInfo* info = caseInfo();
  if (info == nullptr) return;
  if (std::optional<RegionRequest> r = focusRegion(target, info->dims)) {
    r->batch = batch_;
    r->head = head_;
    showRegion(*r);
  }
}

void SessionContext::showRegion(const RegionRequest& request) {
  setBatch(request.batch);
  setHead(request.head);
  emit regionRequested(request);
}

void SessionContext::showView(HeadView view) {
  emit viewRequested(view);
}

void SessionContext::setShownView(HeadView view) {
  if (view == shownView_) return;
  shownView_ = view;
  emit shownViewChanged(view);
}

void SessionContext::zoomView(HeadView view, const MatrixWindow& window) {
  emit zoomRequested(view, window);
}

void SessionContext::reportZoom(HeadView view, const std::optional<MatrixWindow>& window) {
  emit zoomed(view, window);
}

const HeatmapColours& SessionContext::colours(HeadView view) const {
  static const HeatmapColours defaults;
  const auto it = colours_.find(view);
  return it == colours_.end() ? defaults : it->second;
}

void SessionContext::setColours(HeadView view, const HeatmapColours& colours) {
  if (colours == this->colours(view)) return;
  colours_[view] = colours;
  emit coloursChanged(view);
}

void SessionContext::showRowSeries(int64_t batch, int64_t head, RowSeriesKind series) {
  setBatch(batch);
  setHead(head);
  emit rowSeriesRequested(series);
}

QString SessionContext::stamp() const {
  if (!result_) return {};
  const HeadResult& r = *result_;
  return QStringLiteral("%1 · %2 · b%3 h%4 · %5 %6 · scale %7 · mask %8")
             .arg(QFileInfo(QFile::decodeName(r.file_path.c_str())).fileName(),
                  QString::fromStdString(r.case_path))
             .arg(r.request.batch)
             .arg(r.request.head)
             .arg(QString::fromLatin1(precision_name(r.precision)), modeName(r.request.mode()))
             .arg(r.scale, 0, 'g', 8)
             .arg(maskFillName(r.request.run.mask_fill.value_or(MaskFill::neg_inf))) +
         QStringLiteral(" · clip %1")
             .arg(r.request.run.clip_norm
                      ? QStringLiteral("%1 per %2")
                            .arg(*r.request.run.clip_norm, 0, 'g', 6)
                            .arg(QLatin1String(clip_scope_name(r.request.run.clip_scope)))
                      : QStringLiteral("off")) +
         (r.backend == "cpu"
              ? QString()
              : QStringLiteral(" · backend %1").arg(QString::fromStdString(r.backend)));
}

}  // namespace attnscope
