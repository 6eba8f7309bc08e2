// Findings of packed sequences (layout THD with cu_seqlens, DESIGN §2): each sequence is a case
// of its own; these add what only the packing knows.
#pragma once

#include <vector>

#include "core/analysis/finding.h"
#include "core/case_model.h"

namespace attnscope {

// cross_sequence_attention (error) when the group's mask / bias lets this sequence's queries
// attend keys of other sequences (CaseData::leak, counted when the case was loaded).
void add_packed_findings(const CaseData& data, std::vector<Finding>& out);

// Appends the sequence's index and token ranges to every finding's message, so a NaN or a
// fully masked row is located in the packed batch ("row r = query token q_begin + r").
void name_packed_sequence(const CaseInfo& info, std::vector<Finding>& findings);

}  // namespace attnscope
