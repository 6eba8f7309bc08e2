// Controls dock (DESIGN §5): softmax scale as a log slider plus an exact entry and a reset to
// the case's default, precision, mode (fused / unfused), mask fill policy, backend (from the
// kernel registry; those that cannot run the case are greyed out with the reason), gradient
// clip norm, batch and head, compact enough for a laptop's side column. Its notes (why no scale
// helps; the clip's total norm, coefficient and norms before / after) sit in notes(), which the
// window places above the pages. Every change goes into the SessionContext, which triggers the
// background recompute.
#pragma once

#include <QWidget>

#include "kernels/attn_params.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QSlider;
class QSpinBox;
class QToolButton;

namespace attnscope {

class AnalysisController;
class SessionContext;

class ControlsPanel : public QWidget {
  Q_OBJECT

 public:
  // `analysis`: its case summary tells when no scale can help (Q K^T overflows before it).
  ControlsPanel(SessionContext* context, AnalysisController* analysis, QWidget* parent = nullptr);

  QSlider* scaleSlider() const { return slider_; }
  QLineEdit* scaleEdit() const { return scaleEdit_; }
  // The notes below, one paragraph each, hidden when they have nothing to say.
  QWidget* notes() const { return notes_; }
  // Why no scale helps (unfused fp16 with Q K^T beyond 65504).
  QLabel* scaleNote() const { return scaleNote_; }
  QComboBox* precisionBox() const { return precision_; }
  QComboBox* modeBox() const { return mode_; }
  QComboBox* maskFillBox() const { return maskFill_; }
  QComboBox* backendBox() const { return backend_; }
  QCheckBox* clipBox() const { return clipOn_; }
  QLineEdit* clipEdit() const { return clipEdit_; }
  QComboBox* clipScopeBox() const { return clipScope_; }
  // The clip of the shown result: total norm, coefficient, norms before / after.
  QLabel* clipReport() const { return clipReport_; }
  QSpinBox* batchBox() const { return batch_; }
  QSpinBox* headBox() const { return head_; }

  // Scale <-> slider position: the slider spans 10^-3 .. 10^3 times the case's default scale.
  double sliderToScale(int position) const;
  int scaleToSlider(double scale) const;

 private:
  void buildScaleRow(QWidget* box);
  void buildClipRow(QWidget* box);
  void commitClip();
  void showClipReport();
  void onCaseChanged();
  // The recorded run's texts ("as recorded (fp16)", the tooltip), with what the case's analysis
  // inferred once it is in.
  void showReplay();
  void showSettings();
  // Greys out (with the reason as tooltip) the registry backends that cannot run the case at
  // the current precision (kernel_registry's support check).
  void updateBackends();
  AttnParams caseParams() const;
  void commitScaleEdit();
  void showScaleNote();

  SessionContext* context_;
  AnalysisController* analysis_;
  QSlider* slider_ = nullptr;
  QLineEdit* scaleEdit_ = nullptr;
  QToolButton* reset_ = nullptr;
  QLabel* defaultLabel_ = nullptr;
  QLabel* scaleNote_ = nullptr;
  QComboBox* precision_ = nullptr;
  QComboBox* mode_ = nullptr;
  QComboBox* maskFill_ = nullptr;
  QComboBox* backend_ = nullptr;
  QCheckBox* clipOn_ = nullptr;
  QLineEdit* clipEdit_ = nullptr;
  QComboBox* clipScope_ = nullptr;
  QLabel* clipReport_ = nullptr;
  QSpinBox* batch_ = nullptr;
  QSpinBox* head_ = nullptr;
  QLabel* caseLabel_ = nullptr;  // the case's dimensions and dtype
  QWidget* notes_ = nullptr;
};

}  // namespace attnscope
