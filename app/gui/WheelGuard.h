// The mouse wheel never changes a control the user has not focused (a combo box, spin box or
// slider under the pointer while scrolling a panel): the wheel scrolls the panel instead, and
// changes the control only after a click or Tab gave it the keyboard focus.
#pragma once

class QWidget;

namespace attnscope {

// Guards every combo box, spin box and slider under `root` now (focus by click or Tab only,
// wheel ignored while unfocused so that it reaches the scroll area around them).
void guardWheel(QWidget* root);

}  // namespace attnscope
