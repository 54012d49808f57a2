# Stand-in with the keys of whisper.rn rc.4's podspec that the iOS recipe changes.
Pod::Spec.new do |s|
  s.name         = "whisper-rn"
  s.version      = "0.4.0-rc.4"
  s.platforms    = { :ios => "11.0", :tvos => "11.0" }
  s.source_files = "ios/**/*.{h,m,mm}", "cpp/**/*.{h,cpp,hpp,c,m,mm}"
  s.resources    = "cpp/ggml-metal.metal"
  s.compiler_flags = "-DWSP_GGML_USE_ACCELERATE -DWSP_GGML_USE_METAL"
  s.pod_target_xcconfig = {
    "OTHER_LDFLAGS" => "-framework Accelerate -framework Foundation -framework Metal -framework MetalKit",
  }
  s.dependency "React-Core"
end
