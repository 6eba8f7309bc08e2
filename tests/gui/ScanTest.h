// Whole-dump scan tests of the GUI (Qt Test, offscreen, label gui): the real MainWindow on
// dumps of hundreds to thousands of generated cases (ScanDump.h) in a temporary folder. Cancel
// must stop the background CPU work (counted in cases, not timed), a rescan must then finish
// with exact results, and an event-loop watchdog shows the GUI thread stays responsive while
// a multi-gigabyte dump is opened and scanned. Each slot is one CTest test (gui.scan.<slot>).
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QTemporaryDir>
#include <QTimer>
#include <functional>

#include "app/gui/MainWindow.h"
#include "tests/gui/TestSupport.h"

namespace attnscope::test {

// Records the longest gap between ticks of a 10 ms timer on the GUI thread: how long the event
// loop was blocked while it ran. restart() forgets the gaps seen so far.
class Watchdog {
 public:
  Watchdog();
  void restart();
  qint64 worstGapMs() const { return worst_; }
  // Milliseconds since restart() at which the worst gap ended.
  qint64 worstEndMs() const { return worstEnd_; }
  qint64 elapsedMs() const { return clock_.elapsed(); }

 private:
  QTimer timer_;
  QElapsedTimer clock_;
  qint64 last_ = 0, worst_ = 0, worstEnd_ = 0;
};

// Shows `window` at 1400 x 900 with its error messages collected into `errors` instead of shown.
void showCollectingErrors(MainWindow& window, QStringList& errors);

class ScanTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();

  // ScanTests.cpp
  void cancel_stops_series_work_and_rescan_completes();
  void overview_cells_fill_in_as_cases_finish();

  // BigDumpScanTests.cpp
  void big_dump_opens_and_scans_responsively_and_cancels();

 private:
  QTemporaryDir settingsDir_;
};

}  // namespace attnscope::test
