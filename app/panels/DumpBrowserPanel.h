// Dump browser dock: the open files and their cases as a tree (file -> step -> layer -> case,
// or file -> case path), a filter box, Open..., recent files and drag & drop of dump files.
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
  // Files chosen in the dialog, the recent menu or dropped on the panel.
  void openRequested(const QStringList& paths);

 protected:
  void resizeEvent(QResizeEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void rebuild();
  QTreeWidgetItem* fileItem(int fileIndex) const;
  void applyFilter();
  void updateRecentMenu();
  void showCurrentCase();
  void onCurrentItemChanged(QTreeWidgetItem* item);
  void showScan(const QString& file);
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
