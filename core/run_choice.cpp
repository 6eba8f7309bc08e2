// Resolving a run choice against the recorded run (see run_choice.h).
#include "core/run_choice.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/attn_names.h"

namespace attnscope {
namespace {

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

// "fused", "unfused", "upcast" (SDPA MATH's fused run at fp32), joined by " and ".
std::string modes_text(const std::vector<Mode>& modes, bool upcast) {
  std::string out;
  for (Mode m : modes) {
    out += (out.empty() ? "" : " and ");
    out += m == Mode::fused && upcast ? "upcast" : mode_name(m);
  }
  return out;
}

bool same_scale(double a, double b) {
  return std::abs(a - b) <= 1e-12 * std::abs(b);
}

WhatIf what_if(WhatIf::Setting setting, const std::string& short_text, const std::string& recorded,
               bool changes_runs) {
  return WhatIf{setting, short_text,
                recorded.empty() ? short_text : short_text + " (recorded " + recorded + ")",
                changes_runs};
}

}  // namespace

bool RunChoice::operator==(const RunChoice& o) const {
  return scale == o.scale && precision == o.precision && modes == o.modes && upcast == o.upcast &&
         mask_fill == o.mask_fill && backend == o.backend && clip_norm == o.clip_norm &&
         clip_scope == o.clip_scope;
}

std::optional<Mode> RunChoice::mode() const {
  if (modes.size() != 1) return std::nullopt;
  return modes.front();
}

std::string choice_key(const RunChoice& c) {
  std::string key = c.scale ? number(*c.scale) + "/" : std::string("-/");
  // Exact scale bits as well: two scales printed alike are still two choices.
  if (c.scale) {
    char bits[32];
    std::snprintf(bits, sizeof bits, "%a", *c.scale);
    key += bits;
  }
  key += c.precision ? std::string("/") + precision_name(*c.precision) : std::string("/-");
  key += "/";
  for (Mode m : c.modes) key += mode_name(m) + std::string(",");
  key += c.upcast ? "/upcast" : "/-";
  key += c.mask_fill ? std::string("/") + mask_fill_name(*c.mask_fill) : std::string("/-");
  key += "/" + c.backend;
  key += c.clip_norm ? "/" + number(*c.clip_norm) + clip_scope_name(c.clip_scope) : "/noclip";
  return key;
}

bool ResolvedRun::runs_differ() const {
  return std::any_of(what_ifs.begin(), what_ifs.end(),
                     [](const WhatIf& w) { return w.changes_runs; });
}

ResolvedRun resolve(const RunChoice& choice, const Replay& replay, double recorded_scale) {
  ResolvedRun r;
  r.scale = choice.scale.value_or(recorded_scale);
  r.precision = choice.precision.value_or(replay.precision);
  r.modes = choice.modes.empty() ? replay.modes : choice.modes;
  r.upcast = choice.modes.empty() ? replay.upcast : choice.upcast;
  r.mask_fill = choice.mask_fill.value_or(replay.mask_fill);
  r.backend = choice.backend;
  r.clip_norm = choice.clip_norm;
  r.clip_scope = choice.clip_scope;
  using S = WhatIf::Setting;
  if (!same_scale(r.scale, recorded_scale)) {
    r.what_ifs.push_back(
        what_if(S::scale, "scale " + number(r.scale), number(recorded_scale), true));
  }
  if (r.precision != replay.precision) {
    r.what_ifs.push_back(what_if(S::precision,
                                 std::string("precision ") + precision_name(r.precision),
                                 precision_name(replay.precision), true));
  }
  // A mode is a what-if when the recorded run cannot have used it (an unknown backend may have
  // been fused or eager).
  const bool other_mode =
      !choice.modes.empty() &&
      (choice.upcast != replay.upcast ||
       std::any_of(choice.modes.begin(), choice.modes.end(), [&](Mode m) {
         return std::find(replay.modes.begin(), replay.modes.end(), m) == replay.modes.end();
       }));
  if (other_mode) {
    r.what_ifs.push_back(what_if(S::mode, "mode " + modes_text(r.modes, r.upcast),
                                 modes_text(replay.modes, replay.upcast), true));
  }
  if (r.mask_fill != replay.mask_fill) {
    r.what_ifs.push_back(what_if(S::mask_fill,
                                 std::string("mask fill ") + mask_fill_label(r.mask_fill),
                                 mask_fill_label(replay.mask_fill), true));
  }
  if (!r.backend.empty()) {
    r.what_ifs.push_back(what_if(S::backend, "backend " + r.backend, "", false));
  }
  if (r.clip_norm) {
    r.what_ifs.push_back(what_if(S::clip,
                                 "clip " + number(*r.clip_norm) +
                                     (r.clip_scope == ClipScope::per_kv_head ? " per kv head" : ""),
                                 "", false));
  }
  std::string parts;
  for (const WhatIf& w : r.what_ifs) parts += (parts.empty() ? "" : ", ") + w.short_text;
  r.judged_under = parts.empty() ? "as recorded (" + replay.text + ")"
                                 : "what-if: " + parts + " (recorded: " + replay.text + ")";
  return r;
}

RunChoice without_what_ifs(const RunChoice& choice, const Replay& replay, double recorded_scale) {
  RunChoice out = choice;
  for (const WhatIf& w : resolve(choice, replay, recorded_scale).what_ifs) {
    switch (w.setting) {
      case WhatIf::Setting::scale:
        out.scale.reset();
        break;
      case WhatIf::Setting::precision:
        out.precision.reset();
        break;
      case WhatIf::Setting::mode:
        out.modes.clear();
        out.upcast = false;
        break;
      case WhatIf::Setting::mask_fill:
        out.mask_fill.reset();
        break;
      case WhatIf::Setting::backend:
        out.backend.clear();
        break;
      case WhatIf::Setting::clip:
        out.clip_norm.reset();
        break;
    }
  }
  return out;
}

}  // namespace attnscope
