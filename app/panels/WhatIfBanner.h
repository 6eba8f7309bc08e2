// The what-if banner above the heatmaps (DESIGN §5): shown while the settings differ from the
// recorded run, it lists each difference, returns to the recorded run in one click ("Reset to
// recorded"), says whether the what-ifs are kept with the dump's sidecar ("Keep for this dump")
// and, once the case's summary under them is in, which recorded outputs they reproduce (the
// hypothesis test `scan` reports as what_if_explains). Reads and writes the session context;
// reads the analysis controller's summary.
#pragma once

#include <QFrame>

class QCheckBox;
class QLabel;
class QPushButton;

namespace attnscope {

class AnalysisController;
class SessionContext;

class WhatIfBanner : public QFrame {
  Q_OBJECT

 public:
  WhatIfBanner(SessionContext* context, AnalysisController* analysis, QWidget* parent = nullptr);

  QString text() const;
  QPushButton* resetButton() const { return reset_; }
  QCheckBox* keepBox() const { return keep_; }

 private:
  void refresh();

  SessionContext* context_;
  AnalysisController* analysis_;
  QLabel* label_ = nullptr;
  QPushButton* reset_ = nullptr;
  QCheckBox* keep_ = nullptr;
};

}  // namespace attnscope
