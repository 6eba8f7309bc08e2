// The sidecar session file of a dump: user annotations and view state per case, kept next to
// the dump as `<dump>.attnscope.json` once the user annotated it (view state alone, or a dump
// whose folder is not writable: in the user's data folder), never inside the dump. Written
// atomically (QSaveFile). Reading never fails: an older or newer version is read as far as
// understood, fields it does not know are written back untouched, annotations it cannot read are
// kept verbatim, and a corrupt file is moved aside to `<sidecar>.corrupt-<time>` instead of being
// overwritten.
#pragma once

#include <QJsonArray>
#include <QJsonObject>
#include <QMap>
#include <QSet>
#include <QString>
#include <QStringList>
#include <optional>

#include "app/plot/Annotation.h"

namespace attnscope {

// View state and annotations of one case.
struct CaseSession {
  qint64 batch = -1, head = -1;  // -1: never saved
  QString view;                  // heatmap tab ("S", "P", ...)
  // The window each zoomed heatmap tab showed, by tab name; a tab not listed shows the whole
  // matrix. Written as "zooms" plus "zoom" (the window of `view`, all that version 2 files
  // before per-tab zoom held, still read as the zoom of `view`).
  QMap<QString, MatrixWindow> zooms;
  // Colour state of the heatmap tabs that differ from the default, by tab name:
  // {"colormap": "diverging", "scale": "log", "range": [lo, hi]} (no range: automatic) (v2).
  QJsonObject views;
  QList<Annotation> annotations;
  QJsonArray unreadable;  // entries of a newer / damaged file, written back as they were
  QJsonObject extra;      // unknown keys of the case object, written back as they were
};

// Version 2 added the per-case "zoom" (later also "zooms", per tab) and "views" and the
// settings "clip_norm" (later with "clip_scope": "case" or "kv-head", "case" when absent) and
// "backend"; a version 1 file reads as a version 2 one without them.
class SessionFile {
 public:
  static constexpr int kVersion = 2;
  // A sidecar is read only up to this size: a session holds view state and annotations, a few
  // hundred bytes each. A larger file is treated like a corrupt one (moved aside when
  // repairing, else ignored), so loading never stalls on a crafted or runaway file.
  static constexpr qint64 kMaxBytes = qint64{16} << 20;
  // Annotations read per case; those beyond are kept verbatim (CaseSession::unreadable) and
  // written back as they were, never drawn, so none is lost and drawing stays fast.
  static constexpr int kMaxAnnotationsPerCase = 5000;

  // `<dump>.attnscope.json` beside the dump, and the per-user fallback keyed by the dump's
  // absolute path (`<AppDataLocation>/sessions/<name>-<hash of the path>.attnscope.json`).
  static QString besidePath(const QString& dump);
  static QString fallbackPath(const QString& dump);

  // Reads the sidecar of `dump` (beside it, else the fallback, else the fallback of older
  // versions in the config folder); an empty session when there is none. Problems become notes(),
  // never errors. Without `repair` a corrupt file is left where it is (read-only use, e.g. the CLI;
  // such a session must not be saved).
  static SessionFile load(const QString& dump, bool repair = true);

  // Writes atomically. A session holding user annotations (or read from beside the dump) goes
  // to the file it was read from, else beside the dump, else the fallback; view state alone
  // always to the per-user fallback, so nothing appears next to a dump the user did not
  // annotate. A newer-version file is first copied to `<sidecar>.v<N>.bak`. False with a message
  // naming the path on failure. When another writer (a second attnscope window on the same dump)
  // saved the file since this session read or wrote it, its annotations added since are merged
  // in first (a three-way merge against what this session last saw: none is ever lost, this
  // session's edits and view state win) and merged() says so.
  bool save(QString* error);
  // What the last save merged from another writer ("" when nothing): for the status bar.
  const QString& merged() const { return merged_; }

  const QString& dump() const { return dump_; }
  // The file read or last written; empty when the session was never saved.
  const QString& path() const { return path_; }
  bool exists() const { return !path_.isEmpty(); }
  // The session lives in the per-user fallback (view state alone, or the dump's folder was not
  // writable).
  bool inFallback() const;
  // Some case holds a user annotation (kept verbatim ones included).
  bool annotated() const;
  // What loading had to work around (corrupt file moved aside, newer version, skipped entries).
  const QStringList& notes() const { return notes_; }
  int readVersion() const { return readVersion_; }

  QMap<QString, CaseSession> cases;  // by case path
  QString lastCase;
  // The what-if settings last used: precision, mode, scale, mask_fill, clip_norm, clip_scope,
  // backend.
  QJsonObject settings;

 private:
  void parse(const QJsonObject& root);
  QJsonObject serialise() const;

  QString dump_;
  QString path_;
  QStringList notes_;
  int readVersion_ = 0;
  // Merges the annotations another writer added to the file at path_ since lastBytes_.
  void mergeOtherWriter();
  // The annotations of the file as this session last read or wrote it, per case (compact JSON).
  void rememberBaseline();

  QJsonObject original_;  // the root as read: unknown top-level keys survive a save
  bool backedUpNewer_ = false;
  QByteArray lastBytes_;  // the file's bytes as last read or written
  QMap<QString, QSet<QByteArray>> baseline_;
  QString merged_;
};

}  // namespace attnscope
