# Fails when a code block of README.md differs from the source file it copies.
# README marks such a block with a line "<!-- path/from/source/root -->" right
# before the opening fence; the file is the copy that CI compiles and runs.
# Usage: cmake -DSOURCE_DIR=... -DFILES=a,b -P readme_example_sync.cmake
file(READ ${SOURCE_DIR}/README.md readme)
string(REPLACE "," ";" FILES "${FILES}")
foreach(path ${FILES})
  file(READ ${SOURCE_DIR}/${path} expected)
  set(marker "<!-- ${path} -->\n```")
  string(FIND "${readme}" "${marker}" start)
  if(start LESS 0)
    message(FATAL_ERROR "README.md has no code block after the line <!-- ${path} -->")
  endif()
  string(SUBSTRING "${readme}" ${start} -1 rest)
  string(FIND "${rest}" "\n" first_newline)  # the end of the marker line
  math(EXPR after_marker "${first_newline} + 1")
  string(SUBSTRING "${rest}" ${after_marker} -1 rest)
  string(FIND "${rest}" "\n" fence_end)  # the end of the opening fence
  math(EXPR body "${fence_end} + 1")
  string(SUBSTRING "${rest}" ${body} -1 rest)
  string(FIND "${rest}" "\n```\n" end)
  if(end LESS 0)
    message(FATAL_ERROR "README.md: the block after <!-- ${path} --> is not closed")
  endif()
  math(EXPR end "${end} + 1")  # keep the last line's newline
  string(SUBSTRING "${rest}" 0 ${end} block)
  if(NOT block STREQUAL expected)
    message(FATAL_ERROR "README.md's copy of ${path} differs from the file: copy the file "
                        "into README.md (the block after <!-- ${path} -->)")
  endif()
endforeach()
