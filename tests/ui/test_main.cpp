// Runs every registered QtTest class (offscreen, settings in Qt's test location) and fails if
// any of them fails. `ui_tests Class` runs one class; other arguments go to QTest.
#include <QApplication>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "ui_test_registry.h"

namespace {
std::vector<std::pair<const char*, std::function<QObject*()>>>& registry() {
  static std::vector<std::pair<const char*, std::function<QObject*()>>> tests;
  return tests;
}
}  // namespace

int mumoe::testkit::registerUiTest(const char* name, std::function<QObject*()> factory) {
  registry().emplace_back(name, std::move(factory));
  return static_cast<int>(registry().size());
}

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", qgetenv("QT_QPA_PLATFORM").isEmpty() ? QByteArray("offscreen") : qgetenv("QT_QPA_PLATFORM"));
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("mumoe-tests"));
  QApplication::setApplicationName(QStringLiteral("ui_tests"));
  QStandardPaths::setTestModeEnabled(true);
  // A safety net: whatever a test does not point at its own cache file goes to a temporary one.
  QTemporaryDir cacheDir;
  qputenv("MUMOE_CACHE", cacheDir.filePath(QStringLiteral("analysis.sqlite")).toUtf8());
  QSettings().clear();
  const char* only = argc > 1 && argv[1][0] != '-' ? argv[1] : nullptr;
  std::vector<char*> args{argv[0]};
  for (int i = only ? 2 : 1; i < argc; ++i) args.push_back(argv[i]);
  int failures = 0;
  for (const auto& [name, factory] : registry()) {
    if (only && std::strcmp(only, name) != 0) continue;
    QSettings().clear();  // each class starts from defaults (one may have set a data set, say)
    std::unique_ptr<QObject> test(factory());
    failures += QTest::qExec(test.get(), static_cast<int>(args.size()), args.data()) != 0;
  }
  return failures == 0 ? 0 : 1;
}
