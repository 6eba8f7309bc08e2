// Origin dock (DESIGN §5), like an alerts list: every side of a case of the open run whose
// replay holds NaN / Inf, in execution order (nonfinite_events: steps in order, forward layers
// ascending, then backward layers descending, a run's ranks together), each with the sites
// where its non-finite values first appear, in stage order (stage, tab, where, count). The
// first row is the run's NaN origin; clicking a site goes there (FindingNavigator::goToSite:
// the case, its mode, the stage's tab, batch, head and rows).
#pragma once

#include <QWidget>

class QLabel;
class QTreeWidget;
class QTreeWidgetItem;

namespace attnscope {

class FindingNavigator;
class ScanController;
class SessionContext;

class OriginPanel : public QWidget {
  Q_OBJECT

 public:
  OriginPanel(SessionContext* context, ScanController* scans, FindingNavigator* navigator,
              QWidget* parent = nullptr);

  QTreeWidget* list() const { return list_; }
  // Acts as a click on site `site` of event row `event`.
  void activate(int event, int site);

 private:
  void refresh();
  void onActivated(QTreeWidgetItem* item);

  SessionContext* context_;
  ScanController* scans_;
  FindingNavigator* navigator_;
  QLabel* header_ = nullptr;
  QTreeWidget* list_ = nullptr;
};

}  // namespace attnscope
