// Annotations in the main window: the Annotate menu and toolbar (tools text / arrow / box, the
// label to place, automatic markers on or off, remove last, clear view), the AnnotationLayer of
// every heatmap tab and of the row plot (drag moves an annotation, double-click edits its text),
// editing through the annotation list, and the sidecar SessionFile of each open dump, which holds
// the user's annotations and the view state (ViewStateController fills that in before every save
// and decides when the view state alone is worth a save).
#pragma once

#include <QObject>
#include <QSet>
#include <functional>
#include <map>
#include <memory>

#include "app/export/SessionFile.h"
#include "app/plot/AnnotationLayer.h"

class QAction;
class QActionGroup;
class QLineEdit;
class QMenu;
class QToolBar;
class QWidget;

namespace attnscope {

class HeatmapPanel;
class RowPlotPanel;
class SessionContext;

class AnnotationController : public QObject {
  Q_OBJECT

 public:
  AnnotationController(SessionContext* context, HeatmapPanel* heatmaps, QWidget* window);

  // Puts user annotations on the row plots too (view rowSeriesView()).
  void setRowPlots(RowPlotPanel* rowPlots);

  QMenu* menu() const { return menu_; }
  QToolBar* toolBar() const { return toolBar_; }

  void setTool(AnnotationTool tool);
  AnnotationTool tool() const { return tool_; }
  // The label the next placed annotation gets (the toolbar's text field).
  void setLabel(const QString& label);
  void setMarkersShown(bool shown);
  bool markersShown() const;

  // Adds a user annotation to the current dump / case (its view, batch and head as given) and
  // saves the sidecar; false with `error` when no case is open or the save failed.
  bool addAnnotation(const Annotation& annotation, QString* error = nullptr);
  bool removeLast();
  void clearView(const QString& view);
  // Every user annotation of the current case (all views, batches and heads), in order.
  QList<Annotation> caseAnnotations() const;
  // Replaces / removes a user annotation of the current case and saves; false when it is not
  // there (or the save failed).
  bool replaceAnnotation(const Annotation& before, const Annotation& after);
  bool removeAnnotation(const Annotation& annotation);
  // Opens a (non-blocking) text dialog, object name "annotationTextDialog", for an annotation.
  void editText(const Annotation& annotation);

  // User annotations of the current case on `view` at the shown batch / head, and everything
  // drawn there (those plus the automatic markers).
  QList<Annotation> userAnnotations(const QString& view) const;
  QList<Annotation> shownAnnotations(const QString& view) const;
  // The heatmap tabs as named views (for "export all views").
  QList<QPair<QString, QWidget*>> views() const;

  // The session of the current dump (nullptr without one), loaded on first use, and the
  // current case's entry in it.
  const SessionFile* session() const;
  SessionFile* currentSession();
  CaseSession* currentCase();
  // Saves the current session (aboutToSave first); false with a notice on failure.
  bool saveSession();

 signals:
  // Something the user should know (sidecar notes, a failed save); shown in the status bar.
  void notice(const QString& message);
  // The user annotations of the current case changed (added, moved, edited, removed).
  void annotationsChanged();
  // Emitted (synchronously) right before a session is written.
  void aboutToSave(attnscope::SessionFile* session);

 private:
  void buildActions(QWidget* window);
  QString currentView() const;
  void refresh();
  void onPlaced(const QString& view, Annotation annotation);
  void connectLayer(AnnotationLayer* layer, const std::function<QString()>& view);
  // Writes the session; the first write of a dump into the per-user fallback says so once.
  bool save(SessionFile& session, QString* error = nullptr);
  // The automatic markers of a heatmap's grid, computed once per grid (refresh runs several
  // times per result; each scan reads every cell).
  QList<Annotation> markersOf(const QString& view, std::shared_ptr<const MatrixGrid> grid,
                              qint64 batch, qint64 head) const;

  SessionContext* context_;
  HeatmapPanel* heatmaps_;
  RowPlotPanel* rowPlots_ = nullptr;
  std::map<QString, SessionFile> sessions_;  // by absolute dump path
  QSet<QObject*> connectedLayers_;
  QSet<QString> fallbackNoticed_;  // dumps whose session went to the fallback (said once)
  struct Markers {
    std::shared_ptr<const MatrixGrid> grid;  // held: its address identifies the grid
    qint64 batch = -1, head = -1;
    QList<Annotation> list;
  };
  mutable std::map<QString, Markers> markers_cache_;  // by view
  AnnotationTool tool_ = AnnotationTool::none;
  QString label_;

  QMenu* menu_ = nullptr;
  QToolBar* toolBar_ = nullptr;
  QActionGroup* tools_ = nullptr;
  QAction* markers_ = nullptr;
  QLineEdit* labelEdit_ = nullptr;
};

}  // namespace attnscope
