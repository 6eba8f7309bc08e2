// The what-if banner above the heatmaps (DESIGN §5): shown while the settings differ from the
// recorded run, it lists each difference, returns to the recorded run in one click ("Reset to
// recorded") and says whether the what-ifs are kept with the dump's sidecar ("Keep for this
// dump"). Reads and writes the session context only.
#pragma once

#include <QFrame>

class QCheckBox;
class QLabel;
class QPushButton;

namespace attnscope {

class SessionContext;

class WhatIfBanner : public QFrame {
  Q_OBJECT

 public:
  explicit WhatIfBanner(SessionContext* context, QWidget* parent = nullptr);

  QString text() const;
  QPushButton* resetButton() const { return reset_; }
  QCheckBox* keepBox() const { return keep_; }

 private:
  void refresh();

  SessionContext* context_;
  QLabel* label_ = nullptr;
  QPushButton* reset_ = nullptr;
  QCheckBox* keep_ = nullptr;
};

}  // namespace attnscope
