// Stepper dock (DESIGN §6): where the fused backward of the selected head stands (step n of N,
// stage, q / kv tile, rows and keys, non-finite counts of the step's output), buttons and a
// position slider for step back / forward / run to next non-finite / restart, and heatmaps of
// the current tile's intermediates (S, P, dP, dS) and of the accumulators so far (D, dQ, dK_j,
// dV_j, stored dK, dV, dQ). The keys F10 / Shift+F10 / F5 are the main window's actions.
#pragma once

#include <QWidget>
#include <map>

class QLabel;
class QSlider;
class QTabWidget;
class QToolButton;

namespace attnscope {

class HeatmapView;
struct HeatmapAxes;
class SessionContext;
class StepperController;

class StepperPanel : public QWidget {
  Q_OBJECT

 public:
  StepperPanel(SessionContext* context, StepperController* stepper, QWidget* parent = nullptr);

  // "step 12 / 36 · compute_ds · q tile 1, kv tile 0 · rows 64-95, keys 0-63 · ..."
  QString summary() const;
  // The view of a tile intermediate ("tile S", ...) or accumulator ("dQ acc", ...).
  HeatmapView* view(const QString& name) const;
  QSlider* positionSlider() const { return slider_; }

 private:
  void showSnapshot();
  void addView(const QString& name, const HeatmapAxes& axes);

  SessionContext* context_;
  StepperController* stepper_;
  QLabel* summary_ = nullptr;
  QSlider* slider_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  std::map<QString, HeatmapView*> views_;
};

}  // namespace attnscope
