// Saves and restores the view state of a dump through its sidecar session file: the last case,
// the settings (scale, precision, mode, mask fill, clip norm, backend; the what-ifs among them
// only when the user keeps them, SessionContext::whatIfsKept), and per case
// the batch / head, the heatmap tab, the zoom window and the colour state (colormap, scale
// mode, fixed range) of every tab. The state is captured before every save of the session and
// saved for every opened dump: when it changes (debounced; at once when the sidecar already
// exists) and when the window closes. ATTNSCOPE_SESSION_AUTOSAVE=0 in the environment, or Qt's
// test mode (QStandardPaths::setTestModeEnabled), limits that to dumps that have a sidecar.
// It is restored when a dump is shown (its settings: what-ifs never carry over from another
// dump), then when each case is first shown; a tab's zoom when the tab is.
#pragma once

#include <QJsonObject>
#include <QMap>
#include <QObject>
#include <QSet>
#include <map>
#include <optional>

#include "app/plot/Colormaps.h"
#include "core/view/head_view.h"
#include "core/view/matrix_grid.h"

class QTimer;

namespace attnscope {

class AnnotationController;
class SessionContext;
class SessionFile;
struct CaseSession;

class ViewStateController : public QObject {
  Q_OBJECT

 public:
  ViewStateController(SessionContext* context, AnnotationController* annotations,
                      QObject* parent = nullptr);

  // The case last shown in `dump` according to its sidecar (read-only), if the dump has it;
  // empty otherwise.
  static QString lastCase(const QString& dump, const QStringList& cases);
  // Captures the state and writes the sidecar when it exists (the window is closing).
  void saveNow();

 private:
  void onCaseChanged();
  void onStateChanged();
  void capture(SessionFile* session);
  QJsonObject captureViews() const;
  void restoreSettings(const QJsonObject& settings);
  void restoreCase(const CaseSession& saved);
  void restoreViews(const QJsonObject& views);
  void restoreZoom(HeadView view);
  void onZoomed(HeadView view, const std::optional<MatrixWindow>& window);
  void flush();

  SessionContext* context_;
  AnnotationController* annotations_;
  QString shownDump_;  // the dump (or run folder) of the case shown last: whose settings apply
  QSet<QString> restoredCases_;  // "dump|case" whose view state was applied
  bool restoring_ = false;
  bool autosave_ = true;
  QTimer* saveTimer_ = nullptr;
  std::map<HeadView, MatrixWindow> zooms_;         // zoomed tabs of the current case (not whole)
  std::map<HeadView, MatrixWindow> pendingZooms_;  // saved zooms of its tabs not shown yet
};

}  // namespace attnscope
