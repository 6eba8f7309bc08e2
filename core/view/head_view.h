// The heatmaps of one (batch, head), one enum for them all: HeadResult's grids, the GUI's tabs,
// the sidecar's zoom keys, `attnscope --matrix` and `attnscope-cli export --view`. Each view has
// one name (its tab label and sidecar key), the shape of its rows and columns, and the axis
// labels that go with them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace attnscope {

struct CaseDims;

// In tab order: the score-shaped S, P, dP, dS, the outputs and gradients, then their errors
// against the fp64 reference.
enum class HeadView : uint8_t { s, p, dp, ds, o, dq, dk, dv, o_err, dq_err, dk_err, dv_err };

inline constexpr HeadView kHeadViews[] = {HeadView::s,      HeadView::p,      HeadView::dp,
                                          HeadView::ds,     HeadView::o,      HeadView::dq,
                                          HeadView::dk,     HeadView::dv,     HeadView::o_err,
                                          HeadView::dq_err, HeadView::dk_err, HeadView::dv_err};
// kHeadViews[i] is HeadView(i): a tab index is the enum's value.
constexpr bool head_views_in_enum_order() {
  for (size_t i = 0; i < std::size(kHeadViews); ++i) {
    if (static_cast<size_t>(kHeadViews[i]) != i) return false;
  }
  return true;
}
static_assert(head_views_in_enum_order());
inline constexpr HeadView kScoreViews[] = {HeadView::s, HeadView::p, HeadView::dp, HeadView::ds};

// "S", "P", "dP", "dS", "O", "dQ", "dK", "dV", "O err", "dQ err", "dK err", "dV err".
const char* head_view_name(HeadView view);
// Every name in tab order, joined by `separator` ("S, P, dP, ...").
std::string head_view_names(std::string_view separator);
// The view of a name as head_view_name spells it; nullopt for any other text.
std::optional<HeadView> head_view_named(std::string_view name);
// The view that shows a finding's tensor: "S", "P", "dP", "dS", "O", "dQ", "dK", "dV" as they
// are, their lower-case spellings ("dq", "o"), q / k -> S (their scores), lse -> O (its rows);
// nullopt for tensors no heatmap shows (v, mask, bias, ...).
std::optional<HeadView> head_view_of_tensor(std::string_view tensor);

// [Sq x Sk]: S, P, dP, dS.
bool is_score_view(HeadView view);
// S, P and O: what the forward alone computes (HeadRequest::forward_only).
bool is_forward_view(HeadView view);
// S: what the forward's statistics alone compute (HeadRequest::forward_stats_only).
bool is_statistics_view(HeadView view);
// The error grids (computed only when one is shown).
bool is_error_view(HeadView view);
// Rows are keys j ([Sk x D] dK, [Sk x Dv] dV and their errors); otherwise query rows i.
bool has_key_rows(HeadView view);
// Index of a score view in kScoreViews (and ScoreSet); -1 for the others.
int score_view_index(HeadView view);

// Rows x columns of a view for a case: [Sq x Sk] scores, [Sq x Dv] O, [Sq x D] dQ, [Sk x D] dK,
// [Sk x Dv] dV (errors as their tensor).
std::pair<int64_t, int64_t> head_view_shape(HeadView view, const CaseDims& dims);

// Axis labels: rows "query i" or "key j"; columns "key j" (score views) or "feature".
const char* head_view_row_label(HeadView view);
const char* head_view_col_label(HeadView view);

}  // namespace attnscope
