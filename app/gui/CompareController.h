// The compare view's two runs (DESIGN §5, issue 15 item 6): run A is the selected head as the
// controls set it, run B the same head with one thing changed (the other kernel mode, another
// precision or backend) or the dump's recorded outputs, both for one view at the compare
// view's window and size, and their difference (core/view/grid_compare.h). Recomputed in the
// background, latest request wins, only while the compare view is shown.
#pragma once

#include <QObject>
#include <QSize>
#include <QString>
#include <memory>
#include <optional>
#include <string>

#include "core/view/grid_compare.h"
#include "core/view/head_compute.h"

namespace attnscope {

class SessionContext;
class TaskRunner;

// What run B changes.
struct CompareWith {
  enum class Kind : uint8_t { other_mode, precision, backend, recorded };
  Kind kind = Kind::other_mode;
  Precision precision = Precision::f32;  // Kind::precision
  std::string backend;                   // Kind::backend (registry variant)

  bool operator==(const CompareWith& o) const {
    return kind == o.kind && precision == o.precision && backend == o.backend;
  }
};

// Both runs of one view and what tells them apart.
struct Comparison {
  HeadView view = HeadView::s;
  std::shared_ptr<const HeadResult> a, b;  // b: null for the recording
  SharedGrid aGrid, bGrid;                 // the view's grid of each run
  QString aLabel, bLabel;                  // "fp16 fused", "fp16 unfused", "recorded"
  std::optional<GridDifference> difference;
  QString problem;  // why B (or the difference) cannot be shown; empty when both are there
};

class CompareController : public QObject {
  Q_OBJECT

 public:
  explicit CompareController(SessionContext* context, QObject* parent = nullptr);
  ~CompareController() override;

  // Computes only while active (the compare view is shown).
  void setActive(bool active);
  bool active() const { return active_; }
  void setView(HeadView view);
  HeadView view() const { return view_; }
  void setWith(const CompareWith& with);
  const CompareWith& with() const { return with_; }
  // The compare views' shared window (MatrixWindow{}: whole) and their size in pixels.
  void setWindow(const MatrixWindow& window, QSize pixels);

  // The latest comparison (null before the first), and whether one is being computed.
  std::shared_ptr<const Comparison> comparison() const { return comparison_; }
  bool busy() const;
  TaskRunner* runner() const { return runner_; }

 signals:
  void comparisonChanged();

 private:
  void schedule();

  struct State;
  SessionContext* context_;
  TaskRunner* runner_ = nullptr;
  std::shared_ptr<State> state_;  // the runs' stage caches, used by one job at a time
  bool active_ = false;
  HeadView view_ = HeadView::s;
  CompareWith with_;
  MatrixWindow window_;
  QSize pixels_{400, 400};
  std::shared_ptr<const Comparison> comparison_;
};

}  // namespace attnscope
