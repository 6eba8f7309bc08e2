// The shared state every panel reads and writes (DESIGN §1: panels and controllers talk only
// through it): open dumps, the selection (file, case, batch, head, visible score window), the
// what-if settings, the latest computed result, the hovered / pinned cells, the heatmap tab in
// front with its zoom and colours, requests to show a region, and the annotations
// (AnnotationBoard). Each change emits a signal.
#pragma once

#include <QObject>
#include <QSize>
#include <QString>
#include <QStringList>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "app/export/HeadRowSeries.h"
#include "app/gui/AnnotationBoard.h"
#include "app/plot/Colormaps.h"
#include "core/analysis/finding.h"
#include "core/io/case_cache.h"
#include "core/io/hdf5_dump.h"
#include "core/replay.h"
#include "core/run_choice.h"
#include "core/view/head_compute.h"
#include "core/view/summary_store.h"

namespace attnscope {

// The backward stepper's current step (DESIGN §6), highlighted on every heatmap: the query rows
// x keys of `window`; a step over all tiles spans everything.
struct StepTile {
  bool valid = false;
  QString stage;
  int64_t qTile = -1, kvTile = -1;
  MatrixWindow window{0, 0, 0, 0};  // resolved
};

// A region of a heatmap tab to show at (batch, head) of the selected case: the tab is brought
// to the front and, once that head's result is there, zoomed to `window` (an end of -1: every
// row / col, so MatrixWindow{} is the whole matrix); `pin`, a (row, col) inside it, is then
// pinned in the inspector as soon as the zoomed view shows it at full resolution.
struct RegionRequest {
  HeadView view = HeadView::s;
  int64_t batch = 0, head = 0;
  MatrixWindow window;
  std::optional<std::pair<int64_t, int64_t>> pin;
  // Without `pin`: pin the first NaN / Inf cell of the zoomed grid (row-major) once that grid is
  // in, the cell where a non-finite value first appears.
  bool pinFirstNonfinite = false;
  // Brings the heatmaps page to the front (false: a restored zoom, not the user's request).
  bool reveal = true;
};

// Where a finding points (findings list click): a tensor's rows / cols of one (batch, head).
struct FocusTarget {
  QString tensor;  // "S", "dQ", "q", ... (the heatmap shown when one matches)
  int64_t batch = -1, head = -1;
  MatrixWindow window;             // the rows x cols pointed to; an end of -1: every row / col
  bool pinFirstNonfinite = false;  // RegionRequest::pinFirstNonfinite
};

// The location a finding points to (its first place; the head of a run of heads).
FocusTarget findingFocus(const Finding& finding);

// The region of the tab that shows a finding's tensor (head_view_of_tensor) around its rows /
// cols, with some context around a small range, in a case of `dims`; nullopt when no tab shows
// the tensor (q, k, v, mask, ...).
std::optional<RegionRequest> focusRegion(const FocusTarget& target, const CaseDims& dims);

// Which rank of a run folder an open dump is (core/io/run_folder.h): the folder (absolute;
// empty for a dump opened on its own), its rank (the rank attribute, else the rank in its name,
// else its place in the folder) and the host that wrote it (empty when the dump does not say).
struct RunMember {
  QString folder;
  int64_t rank = -1;
  QString host;
};

struct OpenDump {
  QString path;
  std::shared_ptr<const DumpReader> reader;
  std::shared_ptr<CaseCache> cases;  // the reader's cases, read once for every consumer
  // Its cases' summaries at the recorded run, analysed once for the scan and the findings list;
  // kept when a live dump grows (recorded cases do not change).
  std::shared_ptr<SummaryStore> summaries;
  RunMember run;
};

class SessionContext : public QObject {
  Q_OBJECT

 public:
  explicit SessionContext(QObject* parent = nullptr);

  // Opens a dump (or returns the index of the already open one); -1 after emitting
  // errorRaised with the reader's message and hint.
  int openFile(const QString& path);
  // Adds a dump already opened elsewhere (DumpOpener's background job), as a rank of `run`
  // when it names a folder, and returns its index (the existing one when the path is already
  // open). Recent files remember a rank's folder rather than the dump.
  int adoptFile(const QString& path, std::shared_ptr<const DumpReader> reader,
                const RunMember& run = {});
  // Replaces the reader of open file `index` by `reader`, a later open of the same file that
  // lists more cases (a training run still recording, DumpWatcher): a new case cache, the
  // selection kept; emits filesChanged then casesAdded with the new case paths.
  void refreshFile(int index, std::shared_ptr<const DumpReader> reader);
  int fileCount() const { return static_cast<int>(files_.size()); }
  const OpenDump& file(int index) const { return files_[static_cast<size_t>(index)]; }
  int indexOfFile(const QString& path) const;
  // The open files of the run folder file `index` belongs to, by rank (then index); just
  // {index} for a dump opened on its own.
  std::vector<int> runFiles(int index) const;
  QStringList recentFiles() const;

  // Selects a case by group path; false (selection unchanged) when the file has no such case.
  bool selectCase(int fileIndex, const QString& casePath);
  int fileIndex() const { return fileIndex_; }
  QString casePath() const { return casePath_; }
  const CaseInfo* caseInfo() const;
  std::shared_ptr<const DumpReader> reader() const;
  // The selected file's case cache (null when none is selected): what every job reads cases
  // through.
  std::shared_ptr<CaseCache> cases() const;
  // "file|case" of the selection (empty when none): what per-case state is keyed by.
  QString caseKey() const;

  void setBatch(int64_t batch);
  void setHead(int64_t head);
  int64_t batch() const { return batch_; }
  int64_t head() const { return head_; }

  // What the controls chose to run (core/run_choice.h; at most one mode). Left empty it
  // replays the recorded run (core/replay.h), so a case opens replaying what ran.
  const RunChoice& choice() const { return choice_; }
  void setScale(std::optional<double> scale);
  void setPrecision(std::optional<Precision> precision);
  void setMode(std::optional<Mode> mode);
  void setMaskFill(std::optional<MaskFill> fill);
  void setBackend(const std::string& backend);
  void setClipNorm(std::optional<double> maxNorm);
  void setClipScope(ClipScope scope);
  // The error-vs-reference heatmaps are shown: results then carry the fp64 reference errors
  // (costly at long sequences, so only on demand; small cases always have them).
  void setReferenceWanted(bool wanted);
  bool referenceWanted() const { return referenceWanted_; }
  // Which pooled score grids the views need now (the visible tab's; see HeadRequest::scores).
  // A newly wanted one that the result lacks is computed.
  void setScoresWanted(const ScoreSet& wanted);
  const ScoreSet& scoresWanted() const { return scoresWanted_; }
  // The case's own scale (attribute, else the one inferred from its recording, else
  // 1/sqrt(D)) and the values a compute will use.
  double defaultScale() const;
  double effectiveScale() const;
  Precision effectivePrecision() const;
  Mode effectiveMode() const;
  MaskFill effectiveMaskFill() const;
  // What the selected case's recorded run did (the defaults above), with what its analysis
  // inferred where the dump is silent (CaseCache::learn); none without a case.
  std::optional<Replay> replay() const;
  // The case's config judged under the run its analysis inferred (CaseCache::inferred).
  CaseConfig judgedConfig(const CaseInfo& c) const;
  // The shown case's analysis inferred its run (CaseCache::learn returned true): the controls
  // and the views follow it.
  void runInferred();
  // The choice resolved against the selected case's recorded run (resolve(): the what-ifs and
  // judged_under that `attnscope-cli scan` prints for the same choice); nullopt without a case.
  std::optional<ResolvedRun> resolved() const;
  // resolved()'s what-ifs, one phrase each ("precision fp32 (recorded fp16)", "clip 1");
  // empty when the compute replays what ran.
  QStringList whatIfs() const;
  // The choice less its what-ifs (choices that agree with the recorded run stay).
  RunChoice choiceWithoutWhatIfs() const;
  // Forgets every what-if: scale, precision, mode, mask fill, backend and clip as recorded.
  void resetToRecorded();
  // The user asked to keep the what-ifs with the dump's view state (its sidecar); off, the
  // sidecar restores the view only.
  void setWhatIfsKept(bool kept);
  bool whatIfsKept() const { return whatIfsKept_; }

  // The score-matrix window the heatmaps show and their size in pixels (pooling target).
  void setScoreView(const MatrixWindow& window, QSize pixels);
  const MatrixWindow& scoreWindow() const { return window_; }
  QSize scorePixels() const { return pixels_; }

  // The request the current selection and settings describe (nullopt without a case).
  std::optional<HeadRequest> currentRequest() const;

  void setResult(std::shared_ptr<const HeadResult> result);
  std::shared_ptr<const HeadResult> result() const { return result_; }

  void setHovered(const CellReadout& readout);
  const CellReadout& hovered() const { return hovered_; }
  void pin(const CellReadout& readout);

  void setStepTile(const StepTile& tile);
  const StepTile& stepTile() const { return stepTile_; }
  // Selects the target's batch / head and shows its location (focusRegion), if a tab shows it.
  void focus(const FocusTarget& target);
  // Selects the request's batch / head and asks the heatmaps to show the region (they bring the
  // tab forward, then zoom and pin once that head's result is shown); a later request replaces
  // a pending one.
  void showRegion(const RegionRequest& request);

  // The heatmap tab in front; showView asks the heatmaps to bring another one forward.
  HeadView shownView() const { return shownView_; }
  void showView(HeadView view);
  // Reported by the heatmaps when another tab came to the front.
  void setShownView(HeadView view);
  // Asks the heatmaps to zoom a tab to `window` (MatrixWindow{}: the whole matrix).
  void zoomView(HeadView view, const MatrixWindow& window);
  // Reported by the heatmaps after a zoom or pan of a tab: the window it shows (nullopt: the
  // whole matrix).
  void reportZoom(HeadView view, const std::optional<MatrixWindow>& window);
  // The colour choices of each tab; set by the heatmaps when the user changes them, or by the
  // view state restored from a sidecar (the heatmaps then apply them). A range set by hand
  // is dropped when another case is shown.
  const HeatmapColours& colours(HeadView view) const;
  void setColours(HeadView view, const HeatmapColours& colours);
  // The shared annotation state: what each view draws and the user's edits of it.
  AnnotationBoard* annotations() const { return annotations_; }
  // Selects (batch, head) and asks the row plots to show `series` (their page in front).
  void showRowSeries(int64_t batch, int64_t head, RowSeriesKind series);

  // "file · case · b0 h3 · fp16 unfused · scale 0.125 · mask -inf · clip off" (plus
  // " · backend NAME" for a registry backend) of the current result, for titles and exports;
  // empty without a result.
  QString stamp() const;

 signals:
  void filesChanged();
  void casesAdded(const QString& file, const QStringList& paths);  // refreshFile
  void caseChanged();      // a new case is selected (batch, head and window reset)
  void headChanged();      // batch or head changed
  void settingsChanged();  // scale, precision, mode, mask fill, backend, clip or "kept" changed
  void inputsChanged();    // anything a compute depends on changed (after the above)
  void resultChanged();
  void hoverChanged();
  void cellPinned(const attnscope::CellReadout& readout);
  void stepChanged();
  void regionRequested(const attnscope::RegionRequest& request);
  void viewRequested(attnscope::HeadView view);  // showView
  void shownViewChanged(attnscope::HeadView view);
  void zoomRequested(attnscope::HeadView view, const attnscope::MatrixWindow& window);
  void zoomed(attnscope::HeadView view, const std::optional<attnscope::MatrixWindow>& window);
  void coloursChanged(attnscope::HeadView view);
  void rowSeriesRequested(attnscope::RowSeriesKind series);
  void errorRaised(const QString& title, const QString& message, const QString& hint);

 private:
  void rememberRecent(const QString& path);
  void changeChoice(const RunChoice& next);

  std::vector<OpenDump> files_;
  int fileIndex_ = -1;
  QString casePath_;
  int64_t batch_ = 0, head_ = 0;
  RunChoice choice_;
  MatrixWindow window_;
  QSize pixels_{512, 512};
  std::shared_ptr<const HeadResult> result_;
  CellReadout hovered_;
  StepTile stepTile_;
  bool referenceWanted_ = false;
  bool whatIfsKept_ = false;
  ScoreSet scoresWanted_ = kAllScores;
  HeadView shownView_ = HeadView::s;
  std::map<HeadView, HeatmapColours> colours_;  // tabs with a choice (absent: defaults)
  AnnotationBoard* annotations_ = nullptr;
};

}  // namespace attnscope
