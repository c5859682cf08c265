// The demo models the UI tests open (paths set by tests/ui/CMakeLists.txt).
#pragma once

#include <QString>

namespace mumoe::testkit {

inline const QString kDemoModel = QStringLiteral(MUMOE_DEMO_MODEL_PATH);
inline const QString kDemoGpt = QStringLiteral(MUMOE_DEMO_GPT_PATH);

}  // namespace mumoe::testkit
