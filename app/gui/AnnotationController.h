// Annotations in the main window: the Annotate menu and toolbar (tools text / arrow / box, the
// label to place, automatic markers on or off, remove last, clear view), the sidecar
// SessionFile of each open dump, which holds the user's annotations and the view state
// (ViewStateController fills that in before every save and decides when the view state alone
// is worth a save), and the keeper's side of the SessionContext's AnnotationBoard: it publishes
// what every view draws (the user annotations of the shown head, automatic markers of its
// grids) and carries out the edits the views and the annotation list ask for.
#pragma once

#include <QObject>
#include <QSet>
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

class SessionContext;

class AnnotationController : public QObject {
  Q_OBJECT

 public:
  AnnotationController(SessionContext* context, QWidget* window);

  QMenu* menu() const { return menu_; }
  QToolBar* toolBar() const { return toolBar_; }

  void setTool(AnnotationTool tool);
  AnnotationTool tool() const;
  // The label the next placed annotation gets (the toolbar's text field).
  void setLabel(const QString& label);
  void setMarkersShown(bool shown);
  bool markersShown() const;

  // Adds a user annotation to the current dump / case (its view, batch and head as given) and
  // saves the sidecar; false with `error` when no case is open or the save failed.
  bool addAnnotation(const Annotation& annotation, QString* error = nullptr);
  bool removeLast();
  void clearView(const QString& view);
  // Replaces / removes a user annotation of the current case and saves; false when it is not
  // there (or the save failed).
  bool replaceAnnotation(const Annotation& before, const Annotation& after);
  bool removeAnnotation(const Annotation& annotation);
  // Opens a (non-blocking) text dialog, object name "annotationTextDialog", for an annotation.
  void editText(const Annotation& annotation);

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
  // Emitted (synchronously) right before a session is written.
  void aboutToSave(attnscope::SessionFile* session);

 private:
  void buildActions(QWidget* window);
  // Every user annotation of the current case, in order.
  QList<Annotation> caseAnnotations() const;
  // Publishes what every view draws to the context's AnnotationBoard.
  void refresh();
  // An annotation the active tool placed on `view` at the shown head, labelled.
  bool onPlaced(const QString& view, Annotation annotation);
  // Writes the session; the first write of a dump into the per-user fallback says so once.
  bool save(SessionFile& session, QString* error = nullptr);
  // The automatic markers of a result's grid, computed once per grid (refresh runs several
  // times per result; each scan reads every cell).
  QList<Annotation> markersOf(const QString& view, std::shared_ptr<const MatrixGrid> grid,
                              qint64 batch, qint64 head) const;

  SessionContext* context_;
  std::map<QString, SessionFile> sessions_;  // by absolute dump path
  QSet<QString> fallbackNoticed_;            // dumps whose session went to the fallback (said once)
  struct Markers {
    std::shared_ptr<const MatrixGrid> grid;  // held: its address identifies the grid
    qint64 batch = -1, head = -1;
    QList<Annotation> list;
  };
  mutable std::map<QString, Markers> markers_cache_;  // by view
  QString label_;

  QMenu* menu_ = nullptr;
  QToolBar* toolBar_ = nullptr;
  QActionGroup* tools_ = nullptr;
  QAction* markers_ = nullptr;
  QLineEdit* labelEdit_ = nullptr;
};

}  // namespace attnscope
