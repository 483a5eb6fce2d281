# The consumer programs, however devactor was taken in: app (C11) and
# app_cxx (C++17), both -Wall -Wextra -pedantic -Werror, linking
# devactor::devactor.  Included by find/ and subdir/.
set(dv_apps ${CMAKE_CURRENT_LIST_DIR})
add_executable(app ${dv_apps}/app.c)
set_target_properties(app PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(app PRIVATE -Wall -Wextra -pedantic -Werror)
target_link_libraries(app PRIVATE devactor::devactor)
add_executable(app_cxx ${dv_apps}/app.cpp)
set_target_properties(app_cxx PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
target_compile_options(app_cxx PRIVATE -Wall -Wextra -pedantic -Werror)
target_link_libraries(app_cxx PRIVATE devactor::devactor)
