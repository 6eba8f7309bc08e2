// Dump browser dock: the open files and their cases as a tree (file -> step -> layer -> case,
// or file -> case path; a run folder shows as folder -> rank N -> ..., in rank order), a filter
// box, Open..., Open Folder..., recent files and drag & drop of dump files and run folders.
// Cases whose data cannot be read are listed greyed with their error as tooltip; selecting
// one raises the error dialog instead of selecting it. Each case carries the badge of its
// background scan (ScanController: worst severity, the counts and kinds in its tooltip), each
// step and file the worst badge below it.
#pragma once

#include <QStringList>
#include <QWidget>

class QLineEdit;
class QMenu;
class QTreeWidget;
class QTreeWidgetItem;

namespace attnscope {

class ScanController;
class SessionContext;

class DumpBrowserPanel : public QWidget {
  Q_OBJECT

 public:
  DumpBrowserPanel(SessionContext* context, ScanController* scans, QWidget* parent = nullptr);

  // Shows a file dialog and asks to open every chosen file.
  void openWithDialog();
  // Shows a folder dialog and asks to open the chosen run folder (every dump in it).
  void openFolderWithDialog();
  // Asks the window to open files (openRequested; the window opens them in the background).
  void openFiles(const QStringList& paths);
  // Menu of recently opened files (kept up to date; owned by the panel).
  QMenu* recentMenu() const { return recentMenu_; }

  void setFilter(const QString& text);
  // Case paths listed for a file (unreadable ones too), in tree order, and how many case rows
  // pass the filter.
  QStringList casePaths(int fileIndex) const;
  int visibleCaseCount() const;
  QTreeWidget* tree() const { return tree_; }
  // The scan status a case row shows: its verdict text ("2 errors: ..."), "scanning" while
  // pending, or why it could not be scanned; empty for a path the browser does not list.
  QString caseStatus(int fileIndex, const QString& casePath) const;

 signals:
  // Files or run folders chosen in a dialog, the recent menu or dropped on the panel.
  void openRequested(const QStringList& paths);

 protected:
  void resizeEvent(QResizeEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void rebuild();
  QTreeWidgetItem* fileItem(int fileIndex) const;
  // The run folder of open file `fileIndex` with a "rank N (host, file)" item per open rank.
  QTreeWidgetItem* runItem(int fileIndex) const;
  // The top-level item (file or run folder) that holds file `fileIndex`; null when none.
  QTreeWidgetItem* topItemOf(int fileIndex) const;
  void applyFilter();
  void updateRecentMenu();
  void showCurrentCase();
  void onCurrentItemChanged(QTreeWidgetItem* item);
  void showScan(const QString& file);
  // The scan badges of the cases under a top-level item and the worst below each group.
  void showScanUnder(QTreeWidgetItem* top);
  // Hides the dtype, then the shape column when the case column would get too narrow.
  void fitColumns();

  SessionContext* context_;
  ScanController* scans_;
  QTreeWidget* tree_ = nullptr;
  QLineEdit* filter_ = nullptr;
  QMenu* recentMenu_ = nullptr;
  int columnPx_[3] = {};  // the widest text of the shape (1) and dtype (2) columns, padded
};

}  // namespace attnscope
