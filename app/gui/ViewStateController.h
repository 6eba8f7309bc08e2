// Saves and restores the view state of a dump through its sidecar session file: the last case,
// the what-if settings (scale, precision, mode, mask fill, clip norm, backend), and per case
// the batch / head, the heatmap tab, its zoom window and the colour state (colormap, scale
// mode, fixed range) of every tab. The state is captured before every save of the session and
// saved on each change once the sidecar exists (AnnotationController's policy: a dump that was
// never annotated gets no sidecar); it is restored when a dump, then each case, is first shown.
#pragma once

#include <QJsonObject>
#include <QObject>
#include <QSet>
#include <map>

#include "app/plot/Colormaps.h"

namespace attnscope {

class AnnotationController;
class HeatmapPanel;
class NavigationController;
class SessionContext;
class SessionFile;
struct CaseSession;

class ViewStateController : public QObject {
  Q_OBJECT

 public:
  ViewStateController(SessionContext* context, HeatmapPanel* heatmaps,
                      AnnotationController* annotations, NavigationController* navigation,
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

  SessionContext* context_;
  HeatmapPanel* heatmaps_;
  AnnotationController* annotations_;
  NavigationController* navigation_;
  std::map<QString, ColormapKind> defaultMaps_;  // by heatmap tab
  QSet<QString> restoredDumps_;                  // dumps whose settings were applied
  QSet<QString> restoredCases_;                  // "dump|case" whose view state was applied
  bool restoring_ = false;
};

}  // namespace attnscope
