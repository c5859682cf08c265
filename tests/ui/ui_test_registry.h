// Several QtTest classes in one executable (ui_tests): each test file registers its class with
// MUMOE_UI_TEST(Class); test_main.cpp runs them all in one QApplication.
#pragma once

#include <QObject>

#include <functional>

namespace mumoe::testkit {

int registerUiTest(const char* name, std::function<QObject*()> factory);

}  // namespace mumoe::testkit

#define MUMOE_UI_TEST(Class) \
  static const int Class##Registered = ::mumoe::testkit::registerUiTest(#Class, [] { return new Class; });
