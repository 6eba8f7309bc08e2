// Names, shapes and axis labels of the head views (see head_view.h).
#include "core/view/head_view.h"

#include "core/case_model.h"

namespace attnscope {

const char* head_view_name(HeadView view) {
  switch (view) {
    case HeadView::s:
      return "S";
    case HeadView::p:
      return "P";
    case HeadView::dp:
      return "dP";
    case HeadView::ds:
      return "dS";
    case HeadView::o:
      return "O";
    case HeadView::dq:
      return "dQ";
    case HeadView::dk:
      return "dK";
    case HeadView::dv:
      return "dV";
    case HeadView::o_err:
      return "O err";
    case HeadView::dq_err:
      return "dQ err";
    case HeadView::dk_err:
      return "dK err";
    case HeadView::dv_err:
      return "dV err";
  }
  return "?";
}

std::string head_view_names(std::string_view separator) {
  std::string out;
  for (HeadView v : kHeadViews) {
    if (!out.empty()) out += separator;
    out += head_view_name(v);
  }
  return out;
}

std::optional<HeadView> head_view_named(std::string_view name) {
  for (HeadView v : kHeadViews) {
    if (name == head_view_name(v)) return v;
  }
  return std::nullopt;
}

std::optional<HeadView> head_view_of_tensor(std::string_view tensor) {
  if (tensor == "q" || tensor == "k") return HeadView::s;
  if (tensor == "o" || tensor == "lse") return HeadView::o;
  if (tensor == "dp") return HeadView::dp;
  if (tensor == "ds") return HeadView::ds;
  if (tensor == "dq") return HeadView::dq;
  if (tensor == "dk") return HeadView::dk;
  if (tensor == "dv") return HeadView::dv;
  const std::optional<HeadView> v = head_view_named(tensor);
  if (v && !is_error_view(*v)) return v;
  return std::nullopt;
}

bool is_score_view(HeadView view) {
  return score_view_index(view) >= 0;
}

bool is_forward_view(HeadView view) {
  return view == HeadView::s || view == HeadView::p || view == HeadView::o;
}

bool is_statistics_view(HeadView view) {
  return view == HeadView::s;
}

bool is_error_view(HeadView view) {
  return view == HeadView::o_err || view == HeadView::dq_err || view == HeadView::dk_err ||
         view == HeadView::dv_err;
}

bool has_key_rows(HeadView view) {
  return view == HeadView::dk || view == HeadView::dv || view == HeadView::dk_err ||
         view == HeadView::dv_err;
}

int score_view_index(HeadView view) {
  switch (view) {
    case HeadView::s:
      return 0;
    case HeadView::p:
      return 1;
    case HeadView::dp:
      return 2;
    case HeadView::ds:
      return 3;
    default:
      return -1;
  }
}

std::pair<int64_t, int64_t> head_view_shape(HeadView view, const CaseDims& d) {
  switch (view) {
    case HeadView::s:
    case HeadView::p:
    case HeadView::dp:
    case HeadView::ds:
      return {d.seqlen_q, d.seqlen_k};
    case HeadView::o:
    case HeadView::o_err:
      return {d.seqlen_q, d.head_dim_v};
    case HeadView::dq:
    case HeadView::dq_err:
      return {d.seqlen_q, d.head_dim};
    case HeadView::dk:
    case HeadView::dk_err:
      return {d.seqlen_k, d.head_dim};
    case HeadView::dv:
    case HeadView::dv_err:
      return {d.seqlen_k, d.head_dim_v};
  }
  return {0, 0};
}

const char* head_view_row_label(HeadView view) {
  return has_key_rows(view) ? "key j" : "query i";
}

const char* head_view_col_label(HeadView view) {
  return is_score_view(view) ? "key j" : "feature";
}

}  // namespace attnscope
