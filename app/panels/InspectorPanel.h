// Inspector dock: readout of the hovered heatmap cell (matrix, indices or pooled block, class,
// value in fp32 with its bits, its fp16 and bf16 roundings with their bits) and a list of
// pinned cells (click on a heatmap pins). Pins belong to their case: the list shows the
// selected case's (with the batch and head of each) and brings them back with the case.
#pragma once

#include <QString>
#include <QWidget>
#include <vector>

#include "core/view/matrix_grid.h"

class QLabel;
class QTreeWidget;

namespace attnscope {

class SessionContext;

// The readout lines of one value: "fp32 65504 (0x477fe000)", "fp16 65504 (0x7bff)", ...
struct ValueBits {
  QString fp32, fp16, bf16;
};
ValueBits describeValue(float value);

class InspectorPanel : public QWidget {
  Q_OBJECT

 public:
  explicit InspectorPanel(SessionContext* context, QWidget* parent = nullptr);

  // The readout of the hovered cell as shown (several lines).
  QString readoutText() const;
  // Pins of the selected case (the rows of pinnedList).
  int pinnedCount() const;
  QTreeWidget* pinnedList() const { return pinned_; }

 private:
  // A pinned cell with the case, batch and head it was pinned in.
  struct Pin {
    QString caseKey;  // SessionContext::caseKey() when it was pinned
    int64_t batch = 0, head = 0;
    CellReadout cell;
  };

  void showHovered();
  void addPin(const CellReadout& r);
  void showPins();
  void clearPins();

  SessionContext* context_;
  std::vector<Pin> pins_;  // of every case, in pinning order
  QLabel* where_ = nullptr;
  QLabel* cls_ = nullptr;
  QLabel* fp32_ = nullptr;
  QLabel* fp16_ = nullptr;
  QLabel* bf16_ = nullptr;
  QLabel* block_ = nullptr;
  QTreeWidget* pinned_ = nullptr;
};

}  // namespace attnscope
