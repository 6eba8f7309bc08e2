// Sidecar session file: location, tolerant reading and atomic writing (see SessionFile.h).
#include "app/export/SessionFile.h"

#include <QCryptographicHash>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QSaveFile>
#include <QStandardPaths>
#include <algorithm>

namespace attnscope {
namespace {

const QString kFormat = QStringLiteral("attnscope-session");
const QString kSuffix = QStringLiteral(".attnscope.json");
const QStringList kCaseKeys = {
    QStringLiteral("batch"),       QStringLiteral("head"),
    QStringLiteral("view"),        QStringLiteral("zoom"),
    QStringLiteral("zooms"),       QStringLiteral("views"),
    QStringLiteral("annotations"), QStringLiteral("unreadable_annotations")};

// [row_begin, row_end, col_begin, col_end] of non-negative integers with begin < end.
std::optional<MatrixWindow> zoomFromJson(const QJsonValue& value) {
  const QJsonArray a = value.toArray();
  if (a.size() != 4) return std::nullopt;
  int64_t v[4];
  for (int i = 0; i < 4; ++i) {
    const double d = a[i].toDouble(-1);
    if (!(d >= 0) || d != static_cast<double>(static_cast<int64_t>(d))) return std::nullopt;
    v[i] = static_cast<int64_t>(d);
  }
  if (v[0] >= v[1] || v[2] >= v[3]) return std::nullopt;
  return MatrixWindow{v[0], v[1], v[2], v[3]};
}

QJsonArray zoomJson(const MatrixWindow& z) {
  return {qint64{z.row_begin}, qint64{z.row_end}, qint64{z.col_begin}, qint64{z.col_end}};
}

CaseSession parseCase(const QJsonObject& json, const QString& casePath, QStringList& notes) {
  CaseSession c;
  c.batch = json.value(QStringLiteral("batch")).toInteger(-1);
  c.head = json.value(QStringLiteral("head")).toInteger(-1);
  c.view = json.value(QStringLiteral("view")).toString();
  bool badZoom = false;
  const QJsonObject zooms = json.value(QStringLiteral("zooms")).toObject();
  for (auto it = zooms.begin(); it != zooms.end(); ++it) {
    const std::optional<MatrixWindow> w = zoomFromJson(it.value());
    if (w) c.zooms[it.key()] = *w;
    badZoom = badZoom || !w;
  }
  if (json.contains(QStringLiteral("zoom")) && !c.zooms.contains(c.view)) {
    const std::optional<MatrixWindow> w = zoomFromJson(json.value(QStringLiteral("zoom")));
    if (w) c.zooms[c.view] = *w;
    badZoom = badZoom || !w;
  }
  if (badZoom) {
    notes << QStringLiteral(
                 "%1: a saved zoom window is not [row_begin, row_end, col_begin, "
                 "col_end]; that tab shows the whole matrix")
                 .arg(casePath);
  }
  c.views = json.value(QStringLiteral("views")).toObject();
  c.unreadable = json.value(QStringLiteral("unreadable_annotations")).toArray();
  const QJsonArray annotations = json.value(QStringLiteral("annotations")).toArray();
  if (annotations.size() > SessionFile::kMaxAnnotationsPerCase) {
    notes << QStringLiteral(
                 "%1: %2 annotations, more than the %3 attnscope shows per case; the first "
                 "%3 are shown, the others are kept in the session file as they are")
                 .arg(casePath)
                 .arg(annotations.size())
                 .arg(SessionFile::kMaxAnnotationsPerCase);
  }
  for (const QJsonValue& entry : annotations) {
    if (c.annotations.size() >= SessionFile::kMaxAnnotationsPerCase) {
      c.unreadable << entry;
      continue;
    }
    const std::optional<Annotation> a = Annotation::fromJson(entry.toObject());
    if (a) {
      c.annotations << *a;
    } else {
      c.unreadable << entry;
      notes << QStringLiteral("%1: an annotation could not be read and is kept as it was")
                   .arg(casePath);
    }
  }
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (!kCaseKeys.contains(it.key())) c.extra[it.key()] = it.value();
  }
  return c;
}

// Moves a file that cannot be read as a session aside (renamed, else copied) so that the next
// save cannot destroy it; false when neither worked. `note` says what happened.
bool moveAside(const QString& path, const QString& problem, QString& note) {
  const QString aside =
      path + QStringLiteral(".corrupt-") +
      QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyyMMddThhmmsszzz"));
  if (QFile::rename(path, aside) || QFile::copy(path, aside)) {
    note = QStringLiteral("%1: %2; kept as %3, a new session starts").arg(path, problem, aside);
    return true;
  }
  note = QStringLiteral("%1: %2; it could not be moved aside, so the session is saved elsewhere")
             .arg(path, problem);
  return false;
}

// `<location>/sessions/<name>-<hash of the absolute path>.attnscope.json`.
QString perUserPath(const QString& dump, QStandardPaths::StandardLocation location) {
  const QString absolute = QFileInfo(dump).absoluteFilePath();
  const QByteArray hash =
      QCryptographicHash::hash(absolute.toUtf8(), QCryptographicHash::Sha1).toHex().left(16);
  return QStandardPaths::writableLocation(location) + QStringLiteral("/sessions/") +
         QFileInfo(dump).fileName() + QLatin1Char('-') + QString::fromLatin1(hash) + kSuffix;
}

}  // namespace

QString SessionFile::besidePath(const QString& dump) {
  return QFileInfo(dump).absoluteFilePath() + kSuffix;
}

QString SessionFile::fallbackPath(const QString& dump) {
  return perUserPath(dump, QStandardPaths::AppDataLocation);
}

bool SessionFile::annotated() const {
  return std::any_of(cases.begin(), cases.end(), [](const CaseSession& c) {
    return !c.unreadable.isEmpty() || std::any_of(c.annotations.begin(), c.annotations.end(),
                                                  [](const Annotation& a) { return !a.automatic; });
  });
}

bool SessionFile::inFallback() const {
  return !path_.isEmpty() && path_ == fallbackPath(dump_);
}

SessionFile SessionFile::load(const QString& dump, bool repair) {
  SessionFile s;
  s.dump_ = QFileInfo(dump).absoluteFilePath();
  for (const QString& candidate : {besidePath(dump), fallbackPath(dump),
                                   perUserPath(dump, QStandardPaths::AppConfigLocation)}) {
    if (QFileInfo(candidate).isFile()) {
      s.path_ = candidate;
      break;
    }
  }
  if (s.path_.isEmpty()) return s;
  // A file that cannot be a session: ignored read-only, else moved aside (never overwritten).
  const auto refuse = [&](const QString& problem) {
    if (!repair) {
      s.notes_ << QStringLiteral("%1: %2; ignored").arg(s.path_, problem);
      return s;
    }
    QString note;
    const bool kept = moveAside(s.path_, problem, note);
    s.notes_ << note;
    if (!kept) s.path_ = s.path_ == fallbackPath(dump) ? besidePath(dump) : fallbackPath(dump);
    return s;
  };
  QFile file(s.path_);
  if (file.size() > kMaxBytes) {
    return refuse(QStringLiteral("%1 MB, larger than the %2 MB a session file may hold")
                      .arg(static_cast<double>(file.size()) / (1 << 20), 0, 'f', 1)
                      .arg(kMaxBytes >> 20));
  }
  if (!file.open(QIODevice::ReadOnly)) {
    s.notes_ << QStringLiteral("%1: cannot read: %2").arg(s.path_, file.errorString());
    s.path_ = fallbackPath(dump) == s.path_ ? besidePath(dump) : fallbackPath(dump);
    return s;
  }
  QJsonParseError parseError;
  const QByteArray bytes = file.readAll();
  const QJsonDocument doc = QJsonDocument::fromJson(bytes, &parseError);
  file.close();
  const QJsonObject root = doc.object();
  if (parseError.error != QJsonParseError::NoError) {
    return refuse(QStringLiteral("not valid JSON (%1 at byte %2)")
                      .arg(parseError.errorString())
                      .arg(parseError.offset));
  }
  if (!doc.isObject() || root.value(QStringLiteral("format")).toString() != kFormat) {
    return refuse(QStringLiteral("not an attnscope session (no \"format\": \"%1\")").arg(kFormat));
  }
  if (root.contains(QStringLiteral("cases")) && !root.value(QStringLiteral("cases")).isObject()) {
    return refuse(QStringLiteral("\"cases\" is not an object"));
  }
  s.parse(root);
  s.lastBytes_ = bytes;
  s.rememberBaseline();
  return s;
}

void SessionFile::parse(const QJsonObject& root) {
  original_ = root;
  readVersion_ = root.value(QStringLiteral("version")).toInt(0);
  if (readVersion_ > kVersion) {
    notes_ << QStringLiteral(
                  "%1: written by a newer attnscope (session version %2, this one "
                  "reads %3); unknown fields are kept, and the file is backed up "
                  "before it is rewritten")
                  .arg(path_)
                  .arg(readVersion_)
                  .arg(kVersion);
  }
  lastCase = root.value(QStringLiteral("last_case")).toString();
  settings = root.value(QStringLiteral("settings")).toObject();
  const QJsonObject all = root.value(QStringLiteral("cases")).toObject();
  for (auto it = all.begin(); it != all.end(); ++it) {
    cases[it.key()] = parseCase(it.value().toObject(), it.key(), notes_);
  }
}

QJsonObject SessionFile::serialise() const {
  QJsonObject root = original_;
  root[QStringLiteral("format")] = kFormat;
  root[QStringLiteral("version")] = std::max(kVersion, readVersion_);
  const QFileInfo dumpInfo(dump_);
  root[QStringLiteral("dump")] = QJsonObject{
      {QStringLiteral("path"), dump_},
      {QStringLiteral("size"), dumpInfo.size()},
      {QStringLiteral("modified"), dumpInfo.lastModified().toUTC().toString(Qt::ISODateWithMs)}};
  root[QStringLiteral("last_case")] = lastCase;
  root[QStringLiteral("settings")] = settings;
  QJsonObject all;
  for (auto it = cases.begin(); it != cases.end(); ++it) {
    QJsonObject c = it->extra;
    c[QStringLiteral("batch")] = it->batch;
    c[QStringLiteral("head")] = it->head;
    c[QStringLiteral("view")] = it->view;
    QJsonObject zooms;
    for (auto z = it->zooms.begin(); z != it->zooms.end(); ++z) zooms[z.key()] = zoomJson(*z);
    if (!zooms.isEmpty()) c[QStringLiteral("zooms")] = zooms;
    if (it->zooms.contains(it->view)) c[QStringLiteral("zoom")] = zoomJson(it->zooms[it->view]);
    if (!it->views.isEmpty()) c[QStringLiteral("views")] = it->views;
    QJsonArray annotations;
    for (const Annotation& a : it->annotations) {
      if (!a.automatic) annotations << a.toJson();
    }
    c[QStringLiteral("annotations")] = annotations;
    if (!it->unreadable.isEmpty()) c[QStringLiteral("unreadable_annotations")] = it->unreadable;
    all[it.key()] = c;
  }
  root[QStringLiteral("cases")] = all;
  return root;
}

namespace {

QByteArray compact(const QJsonObject& annotation) {
  return QJsonDocument(annotation).toJson(QJsonDocument::Compact);
}

}  // namespace

void SessionFile::rememberBaseline() {
  baseline_.clear();
  for (auto it = cases.begin(); it != cases.end(); ++it) {
    for (const Annotation& a : it->annotations) {
      if (!a.automatic) baseline_[it.key()].insert(compact(a.toJson()));
    }
  }
}

void SessionFile::mergeOtherWriter() {
  merged_.clear();
  // A session that had no file yet looks where it is about to write.
  QString where = path_;
  for (const QString& candidate : {besidePath(dump_), fallbackPath(dump_)}) {
    if (where.isEmpty() && QFileInfo::exists(candidate)) where = candidate;
  }
  QFile file(where);
  if (where.isEmpty() || file.size() > kMaxBytes || !file.open(QIODevice::ReadOnly)) return;
  const QByteArray bytes = file.readAll();
  if (bytes == lastBytes_) return;
  const QJsonObject root = QJsonDocument::fromJson(bytes).object();
  const QJsonObject all = root.value(QStringLiteral("cases")).toObject();
  int added = 0;
  for (auto it = all.begin(); it != all.end(); ++it) {
    CaseSession& mine = cases[it.key()];
    QSet<QByteArray> have;
    for (const Annotation& a : mine.annotations) have.insert(compact(a.toJson()));
    const QSet<QByteArray>& seen = baseline_.value(it.key());
    for (const QJsonValue& entry :
         it.value().toObject().value(QStringLiteral("annotations")).toArray()) {
      const QByteArray key = compact(entry.toObject());
      if (seen.contains(key) || have.contains(key)) continue;  // known, or deleted here
      const std::optional<Annotation> a = Annotation::fromJson(entry.toObject());
      if (!a) continue;
      mine.annotations << *a;
      have.insert(key);
      ++added;
    }
  }
  if (added > 0) {
    merged_ = QStringLiteral(
                  "%1 was saved by another attnscope window on this dump: its %2 new "
                  "annotation(s) are merged in (this window's view state and edits win)")
                  .arg(where)
                  .arg(added);
  }
}

bool SessionFile::save(QString* error) {
  mergeOtherWriter();
  // Nothing new appears next to the user's dump unless they annotated it: view state alone goes
  // to the per-user fallback. With an annotation (or a sidecar beside the dump already): the
  // file it came from, else beside the dump, else the fallback; a file that can no longer be
  // written (the folder became read-only) moves to the next one.
  QStringList targets;
  if (annotated() || path_ == besidePath(dump_)) {
    if (!path_.isEmpty()) targets << path_;
    if (QFileInfo(QFileInfo(dump_).absolutePath()).isWritable()) targets << besidePath(dump_);
  }
  targets << fallbackPath(dump_);
  targets.removeDuplicates();
  const QByteArray bytes = QJsonDocument(serialise()).toJson(QJsonDocument::Indented);
  QString problems;
  for (const QString& target : targets) {
    if (readVersion_ > kVersion && !backedUpNewer_ && QFileInfo::exists(target)) {
      const QString backup = target + QStringLiteral(".v%1.bak").arg(readVersion_);
      if (!QFileInfo::exists(backup) && !QFile::copy(target, backup)) {
        problems += QStringLiteral("%1: cannot back up the newer-version file; ").arg(target);
        continue;
      }
      backedUpNewer_ = true;
    }
    QDir().mkpath(QFileInfo(target).absolutePath());
    QSaveFile out(target);
    if (out.open(QIODevice::WriteOnly) && out.write(bytes) == bytes.size() && out.commit()) {
      path_ = target;
      lastBytes_ = bytes;
      rememberBaseline();
      return true;
    }
    problems += QStringLiteral("%1: %2; ").arg(target, out.errorString());
  }
  if (error) *error = QStringLiteral("cannot save the session: ") + problems.chopped(2);
  return false;
}

}  // namespace attnscope
